// Package jetsnap is the JetStream aggregates.SnapshotStore: the latest
// snapshot of each event subject, one message per subject in a stream of its
// own, read with one Direct Get. It is kept apart from package aggregates so
// that the engine depends on the events.Store interface only.
//
//	snaps, err := jetsnap.Ensure(ctx, js, replicas)
//	engine.Snapshots = snaps
package jetsnap
