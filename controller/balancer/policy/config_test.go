package policy

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	got := DefaultConfig()
	want := Config{
		PChannelWeight:       0.4,
		VChannelWeight:       0.3,
		AntiAffinityWeight:   0.01,
		RebalanceTolerance:   0.01,
		RebalanceMaxStep:     3,
		AllowRebalance:       true,
		MinRebalanceInterval: 5 * time.Minute,
	}
	if got != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v, want nil", err)
	}
}

func TestConfigValidate(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := DefaultConfig()
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"default", DefaultConfig(), false},
		{"all zero", Config{}, false},
		{"max step 8", with(func(c *Config) { c.RebalanceMaxStep = 8 }), false},
		{"max step 0", with(func(c *Config) { c.RebalanceMaxStep = 0 }), false},
		{"no rebalance", with(func(c *Config) { c.AllowRebalance = false }), false},
		{"negative pchannel weight", with(func(c *Config) { c.PChannelWeight = -0.1 }), true},
		{"negative vchannel weight", with(func(c *Config) { c.VChannelWeight = -1 }), true},
		{"negative anti-affinity weight", with(func(c *Config) { c.AntiAffinityWeight = -0.01 }), true},
		{"negative tolerance", with(func(c *Config) { c.RebalanceTolerance = -0.01 }), true},
		{"NaN weight", with(func(c *Config) { c.PChannelWeight = math.NaN() }), true},
		{"Inf weight", with(func(c *Config) { c.VChannelWeight = math.Inf(1) }), true},
		{"NaN tolerance", with(func(c *Config) { c.RebalanceTolerance = math.NaN() }), true},
		{"max step -1", with(func(c *Config) { c.RebalanceMaxStep = -1 }), true},
		{"max step 9", with(func(c *Config) { c.RebalanceMaxStep = 9 }), true},
		{"negative interval", with(func(c *Config) { c.MinRebalanceInterval = -time.Second }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("Validate() = %v, want error: %v", err, tt.wantErr)
			}
			_, err = NewVChannelFair(tt.cfg)
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("NewVChannelFair() = %v, want error: %v", err, tt.wantErr)
			}
			_, err = New(VChannelFairName, tt.cfg)
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("New() = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		wantName string
		wantErr  bool
	}{
		{"vchannelFair", "vchannelFair", "vchannelFair", false},
		{"empty selects default", "", "vchannelFair", false},
		{"unknown", "pchannelCountFair", "", true},
		{"case matters", "VChannelFair", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.policy, DefaultConfig())
			if tt.wantErr {
				if err == nil {
					t.Fatalf("New(%q) = %v, nil; want error", tt.policy, p.Name())
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q) error: %v", tt.policy, err)
			}
			if got := p.Name(); got != tt.wantName {
				t.Fatalf("Name() = %q, want %q", got, tt.wantName)
			}
		})
	}
}

func TestDFSDepth(t *testing.T) {
	tests := []struct{ nodes, maxStep, want int }{
		{8, 3, 3},
		{8, 0, 0},
		{8, 8, 6},   // 8^6 = 2^18 ≤ 2^20 < 8^7
		{2, 8, 8},   // 256 leaves
		{101, 3, 3}, // 1030301 ≤ 1048576
		{102, 3, 2}, // 1061208 > 1048576
		{1024, 3, 2},
		{1 << 20, 3, 1},
		{1<<20 + 1, 3, 0},
	}
	for _, tt := range tests {
		if got := dfsDepth(tt.nodes, tt.maxStep); got != tt.want {
			t.Errorf("dfsDepth(%d, %d) = %d, want %d", tt.nodes, tt.maxStep, got, tt.want)
		}
	}
}

func TestMovable(t *testing.T) {
	const now = int64(10_000_000)
	tests := []struct {
		name     string
		last     int64
		interval time.Duration
		want     bool
	}{
		{"never assigned", 0, 5 * time.Minute, true},
		{"younger", now - 299_999, 5 * time.Minute, false},
		{"exactly the interval", now - 300_000, 5 * time.Minute, true},
		{"older", now - 300_001, 5 * time.Minute, true},
		{"future", now + 1, 0, false},
		{"zero interval", now, 0, true},
		{"sub-ms interval rounds up", now - 1, 1500 * time.Microsecond, false},
		{"sub-ms interval reached", now - 2, 1500 * time.Microsecond, true},
		{"extreme range", math.MinInt64, 5 * time.Minute, true},
	}
	for _, tt := range tests {
		if got := movable(now, tt.last, tt.interval); got != tt.want {
			t.Errorf("%s: movable(%d, %d, %v) = %v, want %v", tt.name, now, tt.last, tt.interval, got, tt.want)
		}
	}
	if !movable(math.MaxInt64, math.MinInt64, 5*time.Minute) {
		t.Errorf("movable(MaxInt64, MinInt64) = false, want true")
	}
}

func TestSentinelErrors(t *testing.T) {
	if ErrNoNodes.Error() != "no available streaming node" {
		t.Fatalf("ErrNoNodes = %q", ErrNoNodes)
	}
	if errors.Is(ErrNoNodes, ErrInvalidLayout) {
		t.Fatalf("ErrNoNodes must not be an ErrInvalidLayout")
	}
}
