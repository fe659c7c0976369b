package httpgateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// marshalJSON renders a message as JSON for the gateway: snake_case proto
// field names, every field present (zero values included), enums by name,
// and 64-bit integers as JSON numbers. protojson would quote 64-bit
// integers; coordd's values (timestamps, indexes, IDs) are meant to be
// compared and sorted by scripts, so they stay numbers. Clients in
// languages without 64-bit integers must parse them as big numbers.
func marshalJSON(m proto.Message) []byte {
	var b bytes.Buffer
	writeMessage(&b, m.ProtoReflect())
	return b.Bytes()
}

func writeMessage(b *bytes.Buffer, m protoreflect.Message) {
	b.WriteByte('{')
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, string(fd.Name()))
		b.WriteByte(':')
		switch {
		case fd.IsList():
			list := m.Get(fd).List()
			b.WriteByte('[')
			for j := 0; j < list.Len(); j++ {
				if j > 0 {
					b.WriteByte(',')
				}
				writeValue(b, fd, list.Get(j))
			}
			b.WriteByte(']')
		case fd.IsMap():
			b.WriteString("{}") // no map fields in the API yet
		case fd.Message() != nil && !m.Has(fd):
			b.WriteString("null")
		default:
			writeValue(b, fd, m.Get(fd))
		}
	}
	b.WriteByte('}')
}

func writeValue(b *bytes.Buffer, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		writeMessage(b, v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			writeString(b, string(ev.Name()))
		} else {
			b.WriteString(strconv.Itoa(int(v.Enum())))
		}
	case protoreflect.StringKind:
		writeString(b, v.String())
	case protoreflect.BytesKind:
		writeString(b, base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	default:
		b.WriteString("null")
	}
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	b.Write(enc)
}
