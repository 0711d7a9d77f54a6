package agentlink

// Hooks for the package's tests that drive the lifecycle controller with a fake clock and without etcd; not part of
// the package's API.

// Start marks the controller's start, as Run does.
func (l *Lifecycle) Start() { l.start = l.cfg.Now() }

// SetPresent overrides presence for tests that drive the controller without etcd.
func (l *Lifecycle) SetPresent(seed string, present bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.presenceLoaded = true
	if present {
		l.present[seed] = true
	} else if l.present[seed] {
		delete(l.present, seed)
		l.lastSeen[seed] = l.cfg.Now()
	}
}
