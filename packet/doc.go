// Package packet is the replay packet of one decision: everything the
// kernel's proposal step read when it decided (the signed decision record,
// the proposal and the inputs the runtime supplied, the subset of the
// configuration that covers its capability, the signed events of every
// subject the step read, and the public keys that signed them) in one file,
// and its offline replay.
//
// The usage loop of an auditor:
//
//	p, err := packet.Parse(b)           // strict: one object, known members, no member twice
//	err = p.Verify(trusted)             // every event signed by a key the packet (and trusted, if given) holds
//	res, err := p.Replay()              // fold, run kernel.ProposeStep, compare
//	if !res.Equal { fmt.Println(res.Difference) }
//
// Replay runs the same pure step the runtime runs (kernel.ProposeInput.Step)
// over the states folded from the packet's events, and compares what it
// decides with the signed record stage by stage (Stages), naming the first
// that differs. The file format is docs/schema/decision-packet.json.
package packet
