// Package milvusconformance holds the tests that prove coordd speaks Milvus
// 2.6's StreamingCoord protocol (docs/milvus.md#conformance-tests). It is a
// module of its own, so Milvus's module and its dependencies never enter
// coordd's; its tests build with -tags test, under which Milvus's test WAL
// registers the decoder of the message IDs coordd answers.
package milvusconformance
