package browserops

import (
	"context"
	"path"
	"strings"

	"github.com/chromedp/cdproto/browser"
	cdproto "github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"

	"github.com/sandhold/sandhold/internal/fault"
)

// Downloads: the browser saves every download into a directory of the
// sandbox (Browser.setDownloadBehavior, default /workspace/downloads;
// Chromium writes it, inside the sandbox, within the workspace quota), and
// the download events feed a bounded log that page/wait type=download
// reads: it answers with the next download not yet reported by a wait,
// once it has completed (so a click that started it may come before the
// wait).

const (
	// DefaultDownloadDir is where downloads go unless a wait named
	// another directory.
	DefaultDownloadDir = "/workspace/downloads"
	// maxDownloads bounds the download log (a page can start many).
	maxDownloads = 100
)

// Download is one download of the browser.
type Download struct {
	GUID     string `json:"guid"`
	URL      string `json:"url"`
	Filename string `json:"suggested_filename"`
	// Path is the file in the sandbox (once completed).
	Path  string  `json:"path,omitempty"`
	Bytes float64 `json:"size"`
	Total float64 `json:"total_bytes,omitempty"`
	State string  `json:"state"`

	dir      string
	reported bool
}

// onDownload runs on the reader goroutine: it only updates the log.
func (b *browserState) onDownload(method string, params jsonv2.Value) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	switch method {
	case "Browser.downloadWillBegin":
		var e browser.EventDownloadWillBegin
		if jsonv2.Unmarshal(params, &e) != nil {
			return
		}
		if len(b.downloads) >= maxDownloads {
			b.downloads = b.downloads[1:]
		}
		b.downloads = append(b.downloads, &Download{GUID: e.GUID, URL: clipLog(e.URL), Filename: clipLog(e.SuggestedFilename),
			State: string(browser.DownloadProgressStateInProgress), dir: b.downloadDirLocked()})
	case "Browser.downloadProgress":
		var e browser.EventDownloadProgress
		if jsonv2.Unmarshal(params, &e) != nil {
			return
		}
		for _, d := range b.downloads {
			if d.GUID != e.GUID {
				continue
			}
			d.Bytes, d.Total, d.State = e.ReceivedBytes, e.TotalBytes, string(e.State)
			if e.State == browser.DownloadProgressStateCompleted {
				d.Path = e.FilePath
				if d.Path == "" || !strings.HasPrefix(d.Path, d.dir+"/") {
					// Not every platform says; Chromium saves under the
					// suggested name in the directory.
					d.Path = path.Join(d.dir, path.Base("/"+d.Filename))
				}
			}
		}
	}
}

func clipLog(s string) string {
	if len(s) > maxLogText {
		return s[:maxLogText]
	}
	return s
}

// downloadDirLocked is the current download directory. Callers hold
// logMu.
func (b *browserState) downloadDirLocked() string {
	if b.downloadDir == "" {
		return DefaultDownloadDir
	}
	return b.downloadDir
}

// allowDownloads points the browser's downloads at the directory, with
// events on. Called on every new connection and when a wait names a
// directory.
func (o *op) allowDownloads(ctx context.Context) error {
	o.b.logMu.Lock()
	dir := o.b.downloadDirLocked()
	o.b.logMu.Unlock()
	_, err := cdproto.Call(ctx, o.b.client.Browser(), browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &yes})
	return err
}

// downloadDir checks a wait's save_path, the directory downloads go to:
// below /workspace or /tmp, no hidden component (the file policy's
// sensitive places all are).
func downloadDir(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		p = path.Join("/workspace", p)
	}
	p = path.Clean(p)
	if strings.ContainsRune(p, 0) || len(p) > 1024 || (!strings.HasPrefix(p, "/workspace/") && p != "/workspace" && !strings.HasPrefix(p, "/tmp/") && p != "/tmp") {
		return "", fault.InvalidField("body.save_path", "downloads are saved in a directory below /workspace or /tmp")
	}
	for _, c := range strings.Split(p, "/") {
		if strings.HasPrefix(c, ".") {
			return "", fault.InvalidField("body.save_path", "save_path must not name a hidden directory")
		}
	}
	return p, nil
}

// waitDownload is page/wait type=download's check: the oldest download
// not reported yet, once it has ended.
func (o *op) waitDownload() checkFunc {
	return func(context.Context) (bool, map[string]any, error) {
		b := o.b
		b.logMu.Lock()
		defer b.logMu.Unlock()
		for _, d := range b.downloads {
			if d.reported {
				continue
			}
			switch browser.DownloadProgressState(d.State) {
			case browser.DownloadProgressStateCompleted:
				d.reported = true
				return true, map[string]any{"path": d.Path, "size": int64(d.Bytes), "url": d.URL,
					"suggested_filename": d.Filename, "state": d.State}, nil
			case browser.DownloadProgressStateCanceled:
				d.reported = true
				return false, nil, fault.Errorf(fault.Conflict, "the download of %s was cancelled", d.URL)
			}
			return false, nil, nil // the oldest is still in progress
		}
		return false, nil, nil
	}
}
