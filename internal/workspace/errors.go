package workspace

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// Error types of AIO's FileOperationError.
const (
	TypeNotFound         = "not_found"
	TypePermissionDenied = "permission_denied"
	TypeInvalidTarget    = "invalid_target"
	TypeAlreadyExists    = "already_exists"
	TypeInvalidPath      = "invalid_path"
	TypeReadOnly         = "read_only_filesystem"
	TypeNoSpace          = "no_space_left"
	TypeDecode           = "decode_error"
	TypeIO               = "io_error"
)

// FileError is AIO's FileOperationError: the data of every failed file
// call. Path is the path the client gave (never a host path).
type FileError struct {
	Path          string  `json:"path"`
	Operation     string  `json:"operation"`
	Message       string  `json:"message"`
	ErrorType     string  `json:"error_type"`
	Retryable     bool    `json:"retryable"`
	Errno         *int    `json:"errno"`
	ErrnoName     *string `json:"errno_name"`
	ExceptionType *string `json:"exception_type"`
	// Reason is why the call was refused, for the audit record (policy
	// refusals: "sensitive_path", "hardlink", "size"); not sent.
	Reason string `json:"-"`
}

func (e *FileError) Error() string { return e.Operation + " " + e.Path + ": " + e.Message }

// errnoTable maps the errno names the init reports to an error type and
// the fault kind (HTTP status) of the call.
var errnoTable = map[string]struct {
	typ  string
	kind fault.Kind
	msg  string
}{
	"ENOENT":       {TypeNotFound, fault.NotFound, "no such file or directory"},
	"EACCES":       {TypePermissionDenied, fault.Forbidden, "permission denied"},
	"EPERM":        {TypePermissionDenied, fault.Forbidden, "operation not permitted"},
	"EEXIST":       {TypeAlreadyExists, fault.Conflict, "file exists"},
	"ENOTEMPTY":    {TypeInvalidTarget, fault.Conflict, "directory not empty"},
	"EISDIR":       {TypeInvalidTarget, fault.Invalid, "is a directory"},
	"ENOTDIR":      {TypeInvalidTarget, fault.Invalid, "not a directory"},
	"ENOTREG":      {TypeInvalidTarget, fault.Invalid, "not a regular file"},
	"ETXTBSY":      {TypeInvalidTarget, fault.Conflict, "text file busy"},
	"EINVAL":       {TypeInvalidPath, fault.Invalid, "invalid path or argument"},
	"ENAMETOOLONG": {TypeInvalidPath, fault.Invalid, "file name too long"},
	// ELOOP: a symlink where none may be (swapped in during the call, or
	// a magic link such as /proc/self/root) or too many of them.
	"ELOOP":  {TypeInvalidPath, fault.Invalid, "path resolves through a symlink that is not allowed here"},
	"EXDEV":  {TypeInvalidPath, fault.Invalid, "path crosses a mount point"},
	"EROFS":  {TypeReadOnly, fault.Forbidden, "read-only file system"},
	"ENOSPC": {TypeNoSpace, fault.TooLarge, "no space left on device"},
	"EDQUOT": {TypeNoSpace, fault.TooLarge, "disk quota exceeded"},
	"EFBIG":  {TypeNoSpace, fault.TooLarge, "file too large"},
	"EAGAIN": {TypeIO, fault.Conflict, "the path changed during the call; retry"},
	"EBUSY":  {TypeIO, fault.Conflict, "device or resource busy"},
	"EIO":    {TypeIO, fault.Internal, "input/output error"},
}

// fileErr builds the fault for a failed file call. err may be an init
// error (errno name), a context error, agent.ErrGone or a fault from the
// sandbox manager; the client sees only messages written here.
func fileErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var fe *FileError
	if errors.As(err, &fe) {
		return err // already built
	}
	var ae *agent.Error
	if errors.As(err, &ae) {
		row, ok := errnoTable[ae.Code]
		if !ok {
			row.typ, row.kind, row.msg = TypeIO, fault.Internal, "file operation failed"
		}
		e := &FileError{Path: p, Operation: op, Message: row.msg, ErrorType: row.typ,
			Retryable: ae.Code == "EAGAIN" || ae.Code == "EBUSY"}
		if n := ae.Errno(); n != 0 {
			num, name := int(n), ae.Code
			e.Errno, e.ErrnoName = &num, &name
		}
		return &fault.Error{Kind: row.kind, Msg: op + " " + p + ": " + row.msg, Err: errors.Join(e, err)}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fileErr(op, p, &agent.Error{Code: errnoName(errno), Msg: errno.Error()})
	}
	switch {
	case errors.Is(err, agent.ErrGone):
		return newErr(fault.Unavailable, op, p, TypeIO, "the sandbox stopped during the call; retry", true, "", err)
	case errors.Is(err, context.DeadlineExceeded):
		return newErr(fault.Timeout, op, p, TypeIO, "the file operation timed out", true, "", err)
	case errors.Is(err, context.Canceled):
		return newErr(fault.Unavailable, op, p, TypeIO, "the request was canceled", true, "", err)
	}
	var f *fault.Error
	if errors.As(err, &f) {
		typ := TypeIO
		switch f.Kind {
		case fault.NotFound:
			typ = TypeNotFound
		case fault.Forbidden:
			typ = TypePermissionDenied
		case fault.Invalid, fault.Unprocessable:
			typ = TypeInvalidPath
		case fault.TooLarge:
			typ = TypeInvalidTarget
		}
		e := &FileError{Path: p, Operation: op, Message: f.Msg, ErrorType: typ, Retryable: f.RetryAfter > 0}
		return &fault.Error{Kind: f.Kind, Msg: f.Msg, Field: f.Field, RetryAfter: f.RetryAfter, Err: errors.Join(e, err)}
	}
	return newErr(fault.Internal, op, p, TypeIO, "file operation failed", false, "", err)
}

// newErr builds a file fault the package decides on its own (policy,
// caps, bad input).
func newErr(kind fault.Kind, op, p, typ, msg string, retry bool, reason string, cause error) error {
	e := &FileError{Path: p, Operation: op, Message: msg, ErrorType: typ, Retryable: retry, Reason: reason}
	var c error = e
	if cause != nil {
		c = errors.Join(e, cause)
	}
	return &fault.Error{Kind: kind, Msg: op + " " + p + ": " + msg, Err: c}
}

// FileErrorOf extracts the FileOperationError of a failed call; for a
// fault that carries none (a refusal by the dispatcher: rate limit, role,
// HALT) it builds one from the kind.
func FileErrorOf(op, p string, err error) *FileError {
	var fe *FileError
	if errors.As(err, &fe) {
		return fe
	}
	_ = errors.As(fileErr(op, p, err), &fe)
	if fe == nil {
		fe = &FileError{Path: p, Operation: op, Message: "file operation failed", ErrorType: TypeIO}
	}
	return fe
}

// ReasonOf is the refusal reason of a failed call, for audit records.
func ReasonOf(err error) string {
	var fe *FileError
	if errors.As(err, &fe) {
		if fe.Reason != "" {
			return fe.Reason
		}
		return fe.ErrorType
	}
	return ""
}

func errnoName(n syscall.Errno) string {
	for name, row := range map[string]syscall.Errno{"ENOENT": syscall.ENOENT, "EACCES": syscall.EACCES,
		"EPERM": syscall.EPERM, "EEXIST": syscall.EEXIST, "EISDIR": syscall.EISDIR, "ENOTDIR": syscall.ENOTDIR,
		"EINVAL": syscall.EINVAL, "ENAMETOOLONG": syscall.ENAMETOOLONG, "ELOOP": syscall.ELOOP,
		"EROFS": syscall.EROFS, "ENOSPC": syscall.ENOSPC, "EDQUOT": syscall.EDQUOT, "EFBIG": syscall.EFBIG,
		"EAGAIN": syscall.EAGAIN, "EIO": syscall.EIO, "EXDEV": syscall.EXDEV, "ENOTEMPTY": syscall.ENOTEMPTY} {
		if row == n {
			return name
		}
	}
	return fmt.Sprintf("errno %d", int(n))
}

// FileErr is the fault a file primitive's failure becomes (errno to kind
// and message, the path as given), for other packages that call the
// primitives through Policy.Locate (internal/e2b's filesystem calls).
func FileErr(op, path string, err error) error { return fileErr(op, path, err) }
