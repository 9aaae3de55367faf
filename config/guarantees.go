package config

// GuaranteeConfig is a [[guarantees]] table.
type GuaranteeConfig struct {
	ID              string   `toml:"id"`
	CapabilityIDs   []string `toml:"capability_ids"`
	ResourcePointer string   `toml:"resource_pointer"`
	AmountPointer   string   `toml:"amount_pointer"`
	Limit           int64    `toml:"limit"`
	Unit            string   `toml:"unit"`
	// Mode is "enforce" (the default) or "observe" (record what would be
	// refused, refuse nothing).
	Mode string `toml:"mode"`
	// Window is "" (no period), "day", "week" or "month" in TimeZone (an
	// IANA name, "" for UTC), or "rolling" over Duration ("24h").
	Window   string `toml:"window"`
	TimeZone string `toml:"time_zone"`
	Duration string `toml:"duration"`
	// ResourceForm is "ascii-token", "nfc" or empty (any string).
	ResourceForm string `toml:"resource_form"`
	// Replaces names the guarantee this one replaces, whose exposure it
	// carries forward; that one may not be configured too.
	Replaces string `toml:"replaces"`
}
