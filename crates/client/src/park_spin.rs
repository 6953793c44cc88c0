//! Polling the data-node sockets for a short while before the runtime's
//! thread sleeps: the client half of NDB's spinning (the data node's half
//! is `spin_us` in its config).
//!
//! A request that waits for one answer (a serial read, a scan round) costs
//! a round trip, and on a virtual machine most of that is waking threads:
//! the answer arrives at a vCPU the hypervisor has halted, ~20–35 µs here.
//! A thread that polls its sockets for a few tens of µs before it sleeps
//! is awake when a quick answer arrives. It trades a busy core for that
//! latency, so it is off unless asked for.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use shoal_client::{ClusterOptions, ParkSpin};
//! let spin = ParkSpin::new(Duration::from_micros(50));
//! let rt = tokio::runtime::Builder::new_current_thread()
//!     .enable_all()
//!     .on_thread_park(spin.hook())
//!     .build()?;
//! let opts = ClusterOptions { park_spin: Some(spin), ..Default::default() };
//! # let _ = (rt, opts);
//! # Ok(()) }
//! ```
//!
//! For a `current_thread` runtime, which is where it was measured
//! (`shoal bench readperf --spin-us`). On a multi-threaded runtime only
//! one worker spins at a time, and a worker that sees an answer while
//! another sleeps in the I/O driver still waits for that one to wake: it
//! burns a core and saves little.
//!
//! How: each connection keeps a second handle on its socket (a `dup`, so
//! only safe std calls are needed) and the hook peeks at it without
//! blocking. Data or an end of stream ends the spin at once; the runtime
//! then parks, finds the socket ready and runs the reader. The handle is
//! dropped when the connection fails, so it never keeps a socket open.
//! A spin runs at every park, with requests waiting or not; while idle
//! the thread parks once and stays asleep, so that costs one spin per
//! wake-up (a timer's, mgmd's).

use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Longest spin accepted: longer only burns the core (the data node's
/// `spin_us` has the same bound).
pub const PARK_SPIN_MAX: Duration = Duration::from_millis(10);

/// A spin before each park of a runtime's thread, over the sockets of the
/// clusters that were given it in [`crate::ClusterOptions::park_spin`].
/// Cheap to clone: clones share the set of sockets.
#[derive(Clone)]
pub struct ParkSpin {
    inner: Arc<Inner>,
}

struct Inner {
    spin: Duration,
    /// The sockets to watch. Entries of failed connections go at the next
    /// spin.
    probes: Mutex<Vec<Weak<Probe>>>,
    /// Set while a thread spins: another thread parks at once instead.
    spinning: AtomicBool,
    /// Spins that ended because a socket had input: the spin's use.
    ended_on_input: AtomicU64,
}

/// A connection's second handle on its socket, for peeking only.
pub(crate) struct Probe {
    stream: Mutex<Option<TcpStream>>,
}

/// Locks, ignoring poisoning: a probe is an `Option` that is either there
/// or not, and the list of probes is valid after any panic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for ParkSpin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkSpin")
            .field("spin", &self.inner.spin)
            .finish_non_exhaustive()
    }
}

impl ParkSpin {
    /// Spins at most `spin` (capped at [`PARK_SPIN_MAX`]) before each park.
    pub fn new(spin: Duration) -> Self {
        ParkSpin {
            inner: Arc::new(Inner {
                spin: spin.min(PARK_SPIN_MAX),
                probes: Mutex::new(Vec::new()),
                spinning: AtomicBool::new(false),
                ended_on_input: AtomicU64::new(0),
            }),
        }
    }

    /// The function to give `tokio::runtime::Builder::on_thread_park`.
    pub fn hook(&self) -> impl Fn() + Send + Sync + 'static {
        let inner = self.inner.clone();
        move || {
            inner.spin_until_readable();
        }
    }

    /// How many spins ended because an answer had come (the others ran
    /// their whole time, or had nothing to watch): 0 after traffic means
    /// the hook is not installed or the cluster was not given this spin.
    pub fn spins_ended_on_input(&self) -> u64 {
        self.inner.ended_on_input.load(Ordering::Relaxed)
    }

    /// One spin, as the hook runs it.
    #[cfg(test)]
    pub(crate) fn spin_once(&self) -> SpinEnd {
        self.inner.spin_until_readable()
    }

    /// Watches `stream` (a non-blocking duplicate of a connection's
    /// socket) until the returned probe is closed or dropped.
    pub(crate) fn watch(&self, stream: TcpStream) -> Arc<Probe> {
        let probe = Arc::new(Probe {
            stream: Mutex::new(Some(stream)),
        });
        let mut probes = lock(&self.inner.probes);
        probes.retain(|p| p.upgrade().is_some_and(|p| p.is_open()));
        probes.push(Arc::downgrade(&probe));
        probe
    }
}

/// Why a spin ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SpinEnd {
    /// A watched socket has input.
    Input,
    /// The spin ran its whole time.
    Deadline,
    /// No socket to watch, or no spin configured.
    Nothing,
    /// Another thread is spinning over the same sockets.
    Busy,
}

impl Inner {
    fn spin_until_readable(&self) -> SpinEnd {
        if self.spin.is_zero() {
            return SpinEnd::Nothing;
        }
        if self.spinning.swap(true, Ordering::Acquire) {
            return SpinEnd::Busy;
        }
        let end = self.spin_over_open_probes();
        self.spinning.store(false, Ordering::Release);
        if end == SpinEnd::Input {
            self.ended_on_input.fetch_add(1, Ordering::Relaxed);
        }
        end
    }

    fn spin_over_open_probes(&self) -> SpinEnd {
        // Taken out of the list, so that a connection opening on another
        // thread does not wait for this spin.
        let probes: Vec<Arc<Probe>> = {
            let mut list = lock(&self.probes);
            let mut open = Vec::with_capacity(list.len());
            list.retain(|weak| match weak.upgrade() {
                Some(p) if p.is_open() => {
                    open.push(p);
                    true
                }
                _ => false,
            });
            open
        };
        if probes.is_empty() {
            return SpinEnd::Nothing;
        }
        let deadline = Instant::now() + self.spin;
        loop {
            if probes.iter().any(|p| p.has_input()) {
                return SpinEnd::Input;
            }
            if Instant::now() >= deadline {
                return SpinEnd::Deadline;
            }
            std::hint::spin_loop();
        }
    }
}

impl Probe {
    /// Whether a read of the socket would not block: bytes, an end of
    /// stream or an error wait there. A closed probe has nothing to say.
    /// (A peek takes a pending socket error, such as a reset, so the
    /// reader then sees the end of the stream instead of the error: the
    /// connection fails either way.)
    fn has_input(&self) -> bool {
        let guard = lock(&self.stream);
        let Some(stream) = guard.as_ref() else {
            return false;
        };
        let mut byte = [0u8; 1];
        match stream.peek(&mut byte) {
            Ok(_) => true,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
        }
    }

    fn is_open(&self) -> bool {
        lock(&self.stream).is_some()
    }

    /// Drops the duplicate handle, so the socket closes with the
    /// connection's own.
    pub(crate) fn close(&self) {
        lock(&self.stream).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        client.set_nonblocking(true).expect("nonblocking");
        (client, server)
    }

    #[test]
    fn the_spin_ends_when_an_answer_is_waiting_and_runs_out_otherwise() {
        let spin = ParkSpin::new(Duration::from_micros(200));
        let (client, mut server) = pair();
        let probe = spin.watch(client.try_clone().expect("dup"));

        // Nothing to read: the whole spin.
        let t = Instant::now();
        assert_eq!(spin.inner.spin_until_readable(), SpinEnd::Deadline);
        assert!(t.elapsed() >= Duration::from_micros(200));

        // An answer waiting: the spin ends on it, and peeking leaves it to
        // be read.
        server.write_all(b"x").expect("write");
        let t = Instant::now();
        while !probe.has_input() {
            assert!(t.elapsed() < Duration::from_secs(10), "the byte never came");
        }
        assert_eq!(spin.inner.spin_until_readable(), SpinEnd::Input);
        let mut byte = [0u8; 1];
        assert_eq!(client.peek(&mut byte).expect("peek"), 1);

        // Another thread spinning: this one parks at once.
        spin.inner.spinning.store(true, Ordering::Relaxed);
        assert_eq!(spin.inner.spin_until_readable(), SpinEnd::Busy);
        spin.inner.spinning.store(false, Ordering::Relaxed);

        // A closed probe is forgotten, even while its connection is still
        // referenced: with nothing to watch, no spin.
        probe.close();
        assert!(!probe.has_input());
        assert_eq!(spin.inner.spin_until_readable(), SpinEnd::Nothing);
        assert!(spin.inner.probes.lock().expect("lock").is_empty());
        assert_eq!(spin.spins_ended_on_input(), 1);
    }

    #[test]
    fn a_closed_probe_releases_the_socket() {
        let spin = ParkSpin::new(Duration::from_micros(50));
        let (client, mut server) = pair();
        let probe = spin.watch(client.try_clone().expect("dup"));
        drop(client);
        probe.close();
        // Both handles gone: the peer sees the end of the stream.
        server
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut buf = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut server, &mut buf).expect("read"), 0);
    }
}
