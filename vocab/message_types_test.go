package vocab

import (
	"errors"
	"testing"
)

func TestValidateKnownMessageType(t *testing.T) {
	for _, ok := range []string{MsgCreateCollection, MsgFlushAll, "CreateIndex", "TruncateCollection"} {
		if err := ValidateKnownMessageType(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"Bogus", "createcollection", "X", "", "Create-Index"} {
		if err := ValidateKnownMessageType(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}
