// Package clients is the ADS server's view of its clients: what each stream subscribes to
// (Subscription, the one definition of "subscribed" for both protocols), the responses sent
// on it and the ACK or NACK that answers each (Tracker: registrar_xds_push_seconds, NACKs,
// the push lags of the drain advice, and the clients the readiness gate waits for), and the
// limits on a client (requests per second and names subscribed per stream, closed with
// RESOURCE_EXHAUSTED beyond them; streams per IP address, PeerStreams). It serves nothing
// itself: internal/xds runs the streams and reports to it what they send and receive.
package clients

// MaxSubscribedNames bounds the resources one stream subscribes to by name, per type: a
// request beyond it closes the stream with RESOURCE_EXHAUSTED. Every subscribed name costs
// the server a few map entries per stream; a client that wants everything asks for "*".
const MaxSubscribedNames = 10000
