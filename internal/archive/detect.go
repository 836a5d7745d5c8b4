package archive

import (
	"bytes"
	"io"
	"strconv"
)

// Detect names the format of an archive from its magic bytes (never from a
// file name). A gzip or zstd stream is reported as tar.gz or tar.zst; whether
// it really holds a tar is found out by Extract.
func Detect(r io.ReaderAt, size int64) (Format, error) {
	var hdr [512]byte
	n := int64(len(hdr))
	if size < n {
		n = size
	}
	if n <= 0 {
		return "", refuse("", KindInvalid, ReasonEmptyArchive, "no bytes")
	}
	if _, err := r.ReadAt(hdr[:n], 0); err != nil && err != io.EOF {
		return "", asError("", err, KindInternal, ReasonIO)
	}
	b := hdr[:n]
	switch {
	case bytes.HasPrefix(b, []byte("PK\x03\x04")), bytes.HasPrefix(b, []byte("PK\x05\x06")):
		return FormatZip, nil
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return FormatTarGz, nil
	case bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return FormatTarZst, nil
	case n == 512 && (bytes.Equal(b[257:262], []byte("ustar")) || tarChecksumOK(b) || allZero(b)):
		return FormatTar, nil
	}
	return "", refuse("", KindInvalid, ReasonUnsupportedFormat, "not a zip, tar, tar.gz or tar.zst archive")
}

// tarChecksumOK recognises a pre-POSIX (v7) tar header by its checksum.
func tarChecksumOK(b []byte) bool {
	field := bytes.TrimRight(bytes.TrimSpace(bytes.Trim(b[148:156], "\x00")), "\x00")
	want, err := strconv.ParseInt(string(field), 8, 64)
	if err != nil || len(field) == 0 {
		return false
	}
	var sum int64
	for i, c := range b {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	return sum == want && sum != 8*' '
}

// allZero recognises an empty tar (it starts with its end-of-archive block).
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
