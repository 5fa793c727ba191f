package gateway

// ViewServers returns what the router of view joins, as it holds them.
func (g *Gateway) ViewServers(view string) []any {
	var out []any
	for _, s := range g.state().routers[view].View().Servers {
		out = append(out, s)
	}
	return out
}

// GateHook is gateHook (the hook's settings and token).
var GateHook = gateHook
