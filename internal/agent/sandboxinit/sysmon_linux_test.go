package sandboxinit

import "testing"

func TestInnermostNSpid(t *testing.T) {
	cases := []struct {
		name   string
		status string
		want   int
		ok     bool
	}{
		{"nested namespace", "Name:\tx\nNSpid:\t6781\t2\nNSpgid:\t1\n", 2, true},
		{"host namespace only", "Name:\tx\nNSpid:\t6781\n", 6781, true},
		{"three levels", "NSpid:\t900\t40\t7\n", 7, true},
		{"no NSpid line (old kernel)", "Name:\tx\nPid:\t5\n", 0, false},
		{"empty NSpid", "NSpid:\n", 0, false},
		{"garbage", "NSpid:\tx\n", 0, false},
		{"NSpgid is not NSpid", "NSpgid:\t1\t2\n", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := InnermostNSpid(tc.status)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("InnermostNSpid = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
