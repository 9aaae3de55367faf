package config

import (
	"errors"
	"time"
)

// Duration is a configuration duration, written as Go writes one ("90s",
// "5m"); it is never negative.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return errors.New("duration must not be negative")
	}
	d.Duration = v
	return nil
}

// optionalDuration is a duration whose absence is told apart from "0s".
type optionalDuration struct {
	time.Duration
	set bool // written by the configuration, even as 0
}

func (d *optionalDuration) UnmarshalText(b []byte) error {
	var v Duration
	if err := v.UnmarshalText(b); err != nil {
		return err
	}
	d.Duration, d.set = v.Duration, true
	return nil
}
