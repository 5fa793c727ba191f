package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthCommand(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	if code, out, errOut := runCmd("health", "--url", srv.URL+"/health"); code != 0 || out != "{\"status\":\"ok\"}\n" {
		t.Errorf("healthy: exit %d, %q %q", code, out, errOut)
	}
	status = http.StatusServiceUnavailable
	if code, _, errOut := runCmd("health", "--url", srv.URL+"/health"); code != 1 || !strings.Contains(errOut, "503") {
		t.Errorf("503: exit %d, %q", code, errOut)
	}
	url := srv.URL
	srv.Close()
	if code, _, errOut := runCmd("health", "--url", url+"/health"); code != 1 || !strings.Contains(errOut, "switchboard health:") {
		t.Errorf("down: exit %d, %q", code, errOut)
	}
}
