package channels

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// convertShape copies from into to, field by field number, and returns to.
// It is the one converter between the API's and the log's copies of a
// message with the same shape (ReplicateConfiguration and the messages in
// it: TestReplicateConfigShapes keeps the two schemas in step). A field
// to does not have is left out.
func convertShape[T proto.Message](from proto.Message, to T) T {
	copyFields(from.ProtoReflect(), to.ProtoReflect())
	return to
}

func copyFields(from, to protoreflect.Message) {
	fields := to.Descriptor().Fields()
	from.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		tfd := fields.ByNumber(fd.Number())
		switch {
		case tfd == nil:
		case fd.IsList():
			src, dst := v.List(), to.Mutable(tfd).List()
			for i := 0; i < src.Len(); i++ {
				dst.Append(copyValue(fd, src.Get(i), dst.NewElement))
			}
		default:
			to.Set(tfd, copyValue(fd, v, func() protoreflect.Value { return to.NewField(tfd) }))
		}
		return true
	})
}

// copyValue copies one (non-list) value of field fd; newMessage makes the
// destination of a message value.
func copyValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, newMessage func() protoreflect.Value) protoreflect.Value {
	if fd.Message() == nil {
		return v // scalars and strings are immutable
	}
	out := newMessage()
	copyFields(v.Message(), out.Message())
	return out
}
