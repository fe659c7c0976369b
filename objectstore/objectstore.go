// Package objectstore is where the reference streaming node's flusher puts
// binlogs: a small interface over gocloud.dev/blob with two backends, a
// local directory (file:// URLs, the default) and S3 or any S3-protocol
// server such as MinIO (s3:// URLs).
//
// URLs:
//
//	file:///abs/dir                       a directory (created if missing)
//	/abs/dir or rel/dir                   the same, without the scheme
//	s3://bucket?endpoint=http://host:9000&use_path_style=true&region=us-east-1
//
// S3 credentials come from the usual AWS sources (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, a shared credentials file and profile, a role),
// never from the URL, which is logged; the query parameters are those of
// gocloud.dev/blob/s3blob (endpoint, region, use_path_style,
// disable_https, profile, anonymous, ...). docs/operations.md#an-s3-or-minio-bucket
// says how to set them up. A refused identity is ErrAccessDenied, a
// missing bucket ErrNoBucket.
package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// Store holds immutable objects under string keys.
type Store interface {
	// Put writes data under key, replacing any object there.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the object under key; ErrNotFound when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// List returns the keys that start with prefix, in lexical order.
	List(ctx context.Context, prefix string) ([]string, error)
	// Create writes data under key only if no object is there (ErrExists
	// otherwise); two racing creators never both succeed. Readers never
	// see a partial object.
	Create(ctx context.Context, key string, data []byte) error
	// ListInfo is List with each object's size and modification time.
	ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the object under key; ErrNotFound when there is none.
	Delete(ctx context.Context, key string) error
	// URL is the URL the store was opened with (normalized).
	URL() string
	Close() error
}

// Errors. Match them with errors.Is.
var (
	ErrNotFound   = errors.New("objectstore: object not found")
	ErrInvalidKey = errors.New("objectstore: invalid key")
	ErrInvalidURL = errors.New("objectstore: invalid URL")
	ErrExists     = errors.New("objectstore: object already exists")
	// ErrAccessDenied: the server refused the request's credentials or
	// their permissions (wrong key or secret, expired token, a key not
	// allowed on the bucket).
	ErrAccessDenied = errors.New("objectstore: access denied")
	// ErrNoBucket: the s3:// URL names a bucket the server does not have.
	ErrNoBucket = errors.New("objectstore: no such bucket")
)

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// MaxKeyBytes bounds a key's length.
const MaxKeyBytes = 1024

// ValidateKey checks that key is a relative, slash-separated object key:
// 1..MaxKeyBytes bytes, no empty, "." or ".." segments, no backslash or
// control characters.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: key must be 1..%d bytes, got %d", ErrInvalidKey, MaxKeyBytes, len(key))
	}
	for _, c := range key {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("%w: key %q contains a control character or backslash", ErrInvalidKey, key)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: key %q: empty, '.' or '..' path segment", ErrInvalidKey, key)
		}
	}
	return nil
}

// Open opens the store a URL names (see the package documentation).
func Open(ctx context.Context, rawURL string) (Store, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidURL)
	}
	if !strings.Contains(rawURL, "://") {
		abs, err := filepath.Abs(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidURL, rawURL, err)
		}
		rawURL = (&url.URL{Scheme: "file", Path: abs}).String()
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	var b *blob.Bucket
	switch u.Scheme {
	case fileblob.Scheme:
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: %q: a file URL names a local directory (file:///abs/dir), not host %q", ErrInvalidURL, rawURL, u.Host)
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("%w: %q: the directory must be an absolute path", ErrInvalidURL, rawURL)
		}
		q := u.Query()
		// Create the directory, keep temporary files beside their final
		// name (renames across file systems fail) and write no sidecar
		// metadata files, unless the URL says otherwise.
		for k, v := range map[string]string{"create_dir": "true", "no_tmp_dir": "true", "metadata": "skip"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
		b, err = (&fileblob.URLOpener{}).OpenBucketURL(ctx, u)
		if err == nil {
			return &bucket{b: b, url: rawURL, dir: filepath.Clean(u.Path)}, nil
		}
	case s3blob.Scheme:
		if u.Host == "" {
			return nil, fmt.Errorf("%w: %q: no bucket (s3://bucket?endpoint=...)", ErrInvalidURL, rawURL)
		}
		b, err = (&s3blob.URLOpener{}).OpenBucketURL(ctx, u)
	default:
		return nil, fmt.Errorf("%w: %q: scheme %q is not supported (file:// or s3://)", ErrInvalidURL, rawURL, u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("objectstore: open %s: %w", rawURL, err)
	}
	return &bucket{b: b, url: rawURL}, nil
}

type bucket struct {
	b   *blob.Bucket
	url string
	dir string // the directory of a file:// store, "" otherwise
	// syncDir makes a directory's new entries durable (nil: fsync it);
	// a test records the calls through it.
	syncDir func(dir string) error
}

func (s *bucket) URL() string  { return s.url }
func (s *bucket) Close() error { return s.b.Close() }

func (s *bucket) wrap(op, key string, err error) error {
	switch code := s3Code(err); {
	case code == "NoSuchBucket":
		return fmt.Errorf("%w: %s %s in %s: the bucket does not exist (create it first): %w", ErrNoBucket, op, key, s.url, err)
	case deniedCode(code) || gcerrors.Code(err) == gcerrors.PermissionDenied:
		return fmt.Errorf("%w to %s: %s %s refused: check the S3 credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"or the credentials file and profile) and the key's permissions on the bucket: %w", ErrAccessDenied, s.url, op, key, err)
	}
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %s %s in %s", ErrNotFound, op, key, s.url)
	}
	return fmt.Errorf("objectstore: %s %s in %s: %w", op, key, s.url, err)
}

// deniedCode: code is an S3 error code of a refused identity or
// permission (gocloud maps only AccessDenied and Forbidden to
// PermissionDenied).
func deniedCode(code string) bool {
	switch code {
	case "AccessDenied", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired",
		"XAdminUserNotFound": // versitygw's answer (a 404) to an access key it does not know
		return true
	}
	return false
}

// s3Code is the S3 error code in err's chain ("" when none): the AWS
// SDK's API errors have an ErrorCode method.
func s3Code(err error) string {
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) {
		return coded.ErrorCode()
	}
	return ""
}

func (s *bucket) Put(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	// Upload streams the whole object and commits it on Close, so a reader
	// never sees a partial object.
	if err := s.b.Upload(ctx, key, bytes.NewReader(data), &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		return s.wrap("put", key, err)
	}
	return nil
}

func (s *bucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	r, err := s.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	return data, nil
}

func (s *bucket) List(ctx context.Context, prefix string) ([]string, error) {
	infos, err := s.ListInfo(ctx, prefix)
	keys := make([]string, 0, len(infos))
	for _, o := range infos {
		keys = append(keys, o.Key)
	}
	return keys, err
}

// ListInfo lists the objects under prefix, sorted by key. A directory
// store walks the directory itself (listDir): fileblob's walk fails the
// whole listing when a file vanishes between the directory read and its
// stat, which a concurrent writer's temporary file does all the time, so a
// collector listing a store under steady writes would fail most passes.
func (s *bucket) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if s.dir != "" {
		if out, ok, err := s.listDir(ctx, prefix); ok {
			return out, err
		}
	}
	return s.listOnce(ctx, prefix)
}

func (s *bucket) listOnce(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, s.wrap("list", prefix+"*", err)
		}
		if !obj.IsDir && !(s.dir != "" && isWriterTemp(obj.Key)) {
			out = append(out, ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
		}
	}
}

// isWriterTemp: key is a temporary file of a write in progress on a
// directory store — createFile's (".create-<random>.tmp") or fileblob's
// ("<key>.<hex nanoseconds>.tmp", kept beside the target by no_tmp_dir).
func isWriterTemp(key string) bool {
	name, ok := strings.CutSuffix(path.Base(key), ".tmp")
	if !ok {
		return false
	}
	if strings.HasPrefix(name, createTempPrefix) {
		return true
	}
	i := strings.LastIndexByte(name, '.')
	if i < 0 || len(name)-i-1 < 8 {
		return false
	}
	for _, c := range name[i+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (s *bucket) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.b.Delete(ctx, key); err != nil {
		return s.wrap("delete", key, err)
	}
	return nil
}

// DefaultDirURL is the file:// URL of dir (made absolute).
func DefaultDirURL(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: abs}).String(), nil
}
