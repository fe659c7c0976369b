package vocab

import (
	"slices"
	"strings"
)

// KnownMessageTypes are the broadcast message types coordd accepts from
// clients: the DDL/DCL messages Milvus broadcasts (collection, partition,
// database, index, load, import, flush, alias, snapshot, RBAC, resource
// group and replication messages). A misspelt type is refused instead of
// being broadcast to every PChannel.
var KnownMessageTypes = []string{
	"AlterAlias", "AlterCollection", "AlterDatabase", "AlterIndex", "AlterLoadConfig", "AlterPrivilege",
	"AlterPrivilegeGroup", MsgAlterReplicateConfig, "AlterResourceGroup", "AlterRole", "AlterUser", "AlterUserRole",
	MsgCreateCollection, "CreateDatabase", "CreateIndex", "CreatePartition", "CreateSnapshot",
	"DropAlias", MsgDropCollection, "DropDatabase", "DropIndex", "DropLoadConfig", "DropPartition", "DropPrivilege",
	"DropPrivilegeGroup", "DropResourceGroup", "DropRole", "DropSnapshot", "DropUser", "DropUserRole",
	MsgFlushAll, "Import", "ManualFlush", "RestoreSnapshot", "TruncateCollection",
}

// ValidateKnownMessageType: t is well formed and one of KnownMessageTypes.
func ValidateKnownMessageType(t string) error {
	if err := ValidateMessageType(t); err != nil {
		return err
	}
	if !slices.Contains(KnownMessageTypes, t) {
		return invalid("message type %q is not a known broadcast message type (%s)", t, strings.Join(KnownMessageTypes, ", "))
	}
	return nil
}
