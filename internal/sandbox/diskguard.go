package sandbox

import (
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
)

// The disk guard (internal/sandbox/diskbudget) stops the workspace
// images' growth once what they hold on the host reaches the disk budget
// or the data dir's free space falls under its floor; the manager reads
// the disk (workspaces, templates, snapshots) and clamps the mounted
// workspaces of its sandboxes and its warm pool.

// watchDisk runs the guard until the manager stops.
func (m *Manager) watchDisk() { m.every(diskbudget.Every, m.checkDisk) }

// checkDisk reads the disk once and stops or resumes growth accordingly;
// while stopped it also clamps volumes mounted since the last reading.
func (m *Manager) checkDisk() {
	m.guard.Check(m.log, m.cfg.DiskBudget, m.cfg.DiskFloor, m.readDisk, func(stop bool) {
		for _, s := range m.volumeHolders() {
			var err error
			if stop {
				err = s.clampVolume()
			} else {
				err = s.unclampVolume()
			}
			if err != nil {
				m.log.Error("disk guard: clamp a workspace", "sandbox", s.rec.ID, "stop", stop, "err", err)
			}
		}
	})
}

// readDisk reads the data dir's free space and the blocks the images hold:
// the workspaces', the templates' layers and the snapshots'.
func (m *Manager) readDisk() (diskbudget.Reading, error) {
	free, err := diskbudget.Free(m.cfg.DataDir)
	if err != nil {
		return diskbudget.Reading{}, err
	}
	r := diskbudget.Reading{Images: imageBytes(m.workspaceRoot()), Free: free}
	if m.cfg.Templates != nil {
		// Templates' layers count against the budget with the images.
		r.Images += m.cfg.Templates.Usage()
	}
	// So do the snapshots.
	r.Images += m.snapshotUsage()
	return r, nil
}

// clampVolume stops the workspace file system's growth where it stands
// (diskbudget.ClampVolume). A volume clamped already is left as it is, so
// what its sandbox deletes while clamped it may write again. Without a
// mounted volume, nothing.
func (s *Sandbox) clampVolume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vol == nil || s.clamp != nil {
		return nil
	}
	c, err := diskbudget.ClampVolume(s.vol)
	if err != nil {
		return err
	}
	s.clamp = c
	return nil
}

// unclampVolume gives a clamped workspace its reserve back.
func (s *Sandbox) unclampVolume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clamp
	if c == nil || s.vol == nil {
		s.clamp = nil
		return nil
	}
	if err := c.Release(); err != nil {
		return err
	}
	s.clamp = nil
	return nil
}

// volumeHolders are the listed sandboxes and the warm pool's.
func (m *Manager) volumeHolders() []*Sandbox {
	all := m.All()
	for _, p := range m.pools {
		p.Each(func(ready []*Sandbox) { all = append(all, ready...) })
	}
	return all
}

// DiskGuard reports the guard's last reading and why growth is stopped
// ("" when it is not), for metrics and the resources view.
func (m *Manager) DiskGuard() (imagesBytes, freeBytes int64, stopped string) {
	return m.guard.Last()
}
