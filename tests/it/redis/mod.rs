//! The Redis store, against real Redis. Every test here needs the switch
//! `PROJECTOR_TEST_REDIS_URL` (for example `redis://127.0.0.1:6379`); when it
//! is unset each one says so and passes.
//!
//! - `order`, `failover`: several real server processes on that Redis and one
//!   key prefix of their own (deleted when the test ends) serve the same
//!   sessions: one gapless order, byte-identical frames, duplicates caught
//!   across nodes, clients resuming after a SIGKILL, a cold node from a
//!   checkpoint, deletion reaching every node.
//! - `faults`, `cluster`: tests that start their own `redis-server` (and
//!   `redis-cli`) on free ports, which must then be on the PATH: Redis going
//!   down and coming back (with or without its data), acknowledgement by a
//!   replica, and a three-primary Redis Cluster.
//! - `partition`: Redis in a network namespace of its own, two nodes
//!   reaching it over veth links; one node's link delayed, cut (packets
//!   dropped) and healed while both ingest and serve (needs root).
//! - `harness`: the switch, the processes, and a byte-exact SSE reader;
//!   `checks`: the events posted and the checks on what comes back.
//!
//! Every wait is bounded (by `harness::DEADLINE` or less). Nodes are ready
//! when they log `listening on`, Redis when it logs that it accepts
//! connections; the multi-node tests wait only for concrete frames or
//! responses, the others poll readiness, ingest or cluster state every 50 ms.

mod checks;
mod cluster;
mod failover;
mod faults;
mod harness;
mod index;
mod order;
mod partition;
mod producers;
mod silence;
