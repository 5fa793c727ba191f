package main

import "github.com/switchboard-mcp/switchboard/internal/buildinfo"

// buildInfo is this binary's build (see internal/buildinfo for the linker
// flags release builds stamp it with).
func buildInfo() buildinfo.Build { return buildinfo.Read() }
