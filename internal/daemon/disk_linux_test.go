package daemon

import (
	"testing"

	"github.com/sandhold/sandhold/internal/config"
)

func TestDiskBudgetDefaultsToAShareOfFreeSpace(t *testing.T) {
	dir := t.TempDir()
	d, err := diskBudget(config.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if d.Free <= 0 || d.Budget <= 0 || d.Budget > d.Free/100*config.DefaultDiskBudgetPercent+1 {
		t.Fatalf("budget %d for %d free bytes, want %d%% of it", d.Budget, d.Free, config.DefaultDiskBudgetPercent)
	}
	if d.Floor < diskFloorMin {
		t.Fatalf("floor %d, want at least %d", d.Floor, diskFloorMin)
	}
	set, err := diskBudget(config.Config{DataDir: dir, DiskBudget: 12345})
	if err != nil || set.Budget != 12345 {
		t.Fatalf("configured budget: %+v, %v", set, err)
	}
}
