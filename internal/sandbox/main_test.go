package sandbox

import (
	"os"
	"testing"
)

// TestMain makes the test binary a script worker when a Runner starts it
// as one (see WorkerMain).
func TestMain(m *testing.M) {
	WorkerMain()
	os.Exit(m.Run())
}
