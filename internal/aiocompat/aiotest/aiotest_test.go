package aiotest

import (
	"strings"
	"testing"
)

// TestValidatorCatchesDrift proves the validator can fail: shapes AIO
// does not accept are reported, AIO's own shapes pass.
func TestValidatorCatchesDrift(t *testing.T) {
	v := Load(t)
	cases := []struct {
		name, method, path, body string
		ok                       bool
	}{
		{"read ok", "POST", "/v1/file/read", `{"success":true,"message":"ok","data":{"content":"x","file":"/workspace/a"},"hint":null}`, true},
		{"read error data", "POST", "/v1/file/read", `{"success":false,"message":"no","data":{"path":"/a","operation":"read","message":"m","error_type":"not_found","retryable":false,"errno":2,"errno_name":"ENOENT","exception_type":null},"hint":null}`, true},
		{"read content not a string", "POST", "/v1/file/read", `{"success":true,"data":{"content":5,"file":"/a"}}`, false},
		{"read missing file field", "POST", "/v1/file/read", `{"success":true,"data":{"content":"x"}}`, false},
		{"success not a bool", "POST", "/v1/file/write", `{"success":"yes","data":null}`, false},
		{"grep match without line_number", "POST", "/v1/file/grep", `{"success":true,"data":{"path":"/w","pattern":"p","matches":[{"file":"/w/a","line_content":"x"}]}}`, false},
		{"list ok", "POST", "/v1/file/list", `{"success":true,"message":"ok","data":{"path":"/w","files":[{"name":"a","path":"/w/a","is_directory":false,"size":1}],"total_count":1,"directory_count":0,"file_count":1},"hint":null}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := v.Validate(c.method, c.path, []byte(c.body))
			if (err == nil) != c.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, c.ok)
			}
		})
	}
	if err := v.Validate("POST", "/v1/no/such", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no path") {
		t.Fatalf("unknown path: %v", err)
	}
}
