package agenttest

import (
	"log/slog"
	"testing"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
)

// Agent is a running agent and its log.
type Agent struct {
	*agent.Agent
	// Logs is the agent's log, printed when the test fails.
	Logs *LogSink
	stop func()
}

// StartAgent runs an agent with cfg, logging to its LogSink, until Stop or the end of the test; mutate may adjust
// its agent.Config. The test fails when the agent cannot be made, when Run returns an error, or when it does not
// return within WaitTimeout of Stop.
func StartAgent(t testing.TB, cfg *config.AgentConfiguration, mutate ...func(*agent.Config)) *Agent {
	t.Helper()
	ta := &Agent{Logs: NewLogSink()}
	c := agent.Config{Configuration: cfg, Logger: slog.New(ta.Logs), Version: "test"}
	for _, m := range mutate {
		m(&c)
	}
	a, err := agent.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ta.Agent = a
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent %s log:\n%s", cfg.SeedConfig.Seed.GetMetadata().GetName(), ta.Logs)
		}
	})
	ta.stop = goRun(t, "the agent", a.Run)
	t.Cleanup(ta.stop)
	return ta
}

// Stop stops the agent and waits for Run to return.
func (ta *Agent) Stop() { ta.stop() }
