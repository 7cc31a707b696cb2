package etcd

// Queued is how many Applies of s wait for the next coalesced transaction (tests only).
func Queued(s *Store) int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.queue)
}
