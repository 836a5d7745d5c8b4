package daemon

import (
	"testing"

	"github.com/sandhold/sandhold/internal/config"
)

func TestDiskBudgetDefaultsToAShareOfFreeSpace(t *testing.T) {
	dir := t.TempDir()
	budget, free, err := diskBudget(config.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if free <= 0 || budget <= 0 || budget > free/100*config.DefaultDiskBudgetPercent+1 {
		t.Fatalf("budget %d for %d free bytes, want %d%% of it", budget, free, config.DefaultDiskBudgetPercent)
	}
	set, _, err := diskBudget(config.Config{DataDir: dir, DiskBudget: 12345})
	if err != nil || set != 12345 {
		t.Fatalf("configured budget: %d, %v", set, err)
	}
}
