//go:build !linux

package gateway

import "github.com/fsnotify/fsnotify"

// watchDirs watches dirs with fsnotify and sends the path of each event on
// the returned channel. A directory that cannot be watched is reported to
// failed and skipped. stop ends the watch and closes the channel.
func watchDirs(dirs []string, failed func(dir string, err error)) (events <-chan string, stop func(), err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, err
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			failed(d, err)
		}
	}
	ch := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		for range w.Errors {
		}
	}()
	go func() {
		defer close(ch)
		for ev := range w.Events {
			select {
			case ch <- ev.Name:
			case <-done:
				return
			}
		}
	}()
	return ch, func() { close(done); w.Close() }, nil
}
