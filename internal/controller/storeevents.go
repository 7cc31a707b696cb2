package controller

import "time"

// DefaultResyncInterval is the period of the full re-read when Options.ResyncInterval is zero.
const DefaultResyncInterval = 5 * time.Minute
