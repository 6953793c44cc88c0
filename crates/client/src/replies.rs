//! [`ReplySlots`]: where the answers to one connection's requests wait for
//! their transactions. A request takes a slot when it is sent; its answer
//! (the node's reply, a timeout, or the connection's failure) is stored in
//! the slot, and the transaction takes it from there. Slots are reused, so
//! a request costs no allocation, no channel and no reference count: the
//! table lives under the connection's lock, which sending a request and
//! routing its reply take anyway.
//!
//! Invariants:
//! - A slot is `Free` exactly when its index is on the free list.
//! - A slot taken is answered exactly once and freed exactly once: by
//!   [`ReplySlots::poll_take`] once answered, or, when its waiter went
//!   away first ([`ReplySlots::abandon`]), by the answer.
//! - The table holds at most as many slots as requests were in flight at
//!   once, and shrinks back to [`SLOTS_KEPT`] when none is.

use crate::conn::ReplyResult;
use std::task::{Context, Poll, Waker};

/// Slots kept once no request is in flight: a burst of requests does not
/// pin its memory for the life of the connection.
const SLOTS_KEPT: usize = 4096;

/// Names one slot of a connection's [`ReplySlots`]. Only the request's
/// transaction (or whoever answers it) holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplySlot(u32);

enum Slot {
    Free,
    /// No answer yet; the waker of the task that last polled for it.
    Waiting(Option<Waker>),
    Answered(ReplyResult),
    /// The waiter went away before the answer came.
    Abandoned,
}

#[derive(Default)]
pub(crate) struct ReplySlots {
    slots: Vec<Slot>,
    free: Vec<u32>,
    in_use: usize,
}

impl ReplySlots {
    /// A slot for a request about to be sent.
    pub(crate) fn open(&mut self) -> ReplySlot {
        self.in_use += 1;
        match self.free.pop() {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                assert!(matches!(slot, Slot::Free), "slot {i} on the free list");
                *slot = Slot::Waiting(None);
                ReplySlot(i)
            }
            None => {
                let i =
                    u32::try_from(self.slots.len()).expect("fewer than 2^32 requests in flight");
                self.slots.push(Slot::Waiting(None));
                ReplySlot(i)
            }
        }
    }

    /// Stores the answer to `slot`'s request. Returns the waiter's waker,
    /// to wake once the lock is released.
    #[must_use]
    pub(crate) fn answer(&mut self, slot: ReplySlot, result: ReplyResult) -> Option<Waker> {
        let s = &mut self.slots[slot.0 as usize];
        match std::mem::replace(s, Slot::Answered(result)) {
            Slot::Waiting(waker) => waker,
            Slot::Abandoned => {
                self.release(slot);
                None
            }
            Slot::Free | Slot::Answered(_) => panic!("{slot:?} answered twice"),
        }
    }

    /// Takes `slot`'s answer if it came (freeing the slot); otherwise
    /// remembers `cx`'s waker for [`ReplySlots::answer`].
    pub(crate) fn poll_take(&mut self, slot: ReplySlot, cx: &mut Context<'_>) -> Poll<ReplyResult> {
        let s = &mut self.slots[slot.0 as usize];
        match s {
            Slot::Answered(_) => {
                let Slot::Answered(result) = std::mem::replace(s, Slot::Free) else {
                    unreachable!("matched above")
                };
                self.release(slot);
                Poll::Ready(result)
            }
            Slot::Waiting(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Slot::Free | Slot::Abandoned => panic!("{slot:?} polled after it was given up"),
        }
    }

    /// The waiter of `slot` goes away: its answer, if it came, is dropped
    /// now; otherwise when it comes.
    pub(crate) fn abandon(&mut self, slot: ReplySlot) {
        let s = &mut self.slots[slot.0 as usize];
        match s {
            Slot::Waiting(_) => *s = Slot::Abandoned,
            Slot::Answered(_) => self.release(slot),
            Slot::Free | Slot::Abandoned => panic!("{slot:?} given up twice"),
        }
    }

    /// Slots taken and not yet freed.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.in_use
    }

    fn release(&mut self, slot: ReplySlot) {
        self.slots[slot.0 as usize] = Slot::Free;
        self.in_use -= 1;
        if self.in_use == 0 && self.slots.len() > SLOTS_KEPT {
            self.slots.clear();
            self.slots.shrink_to(SLOTS_KEPT);
            self.free.clear();
            self.free.shrink_to(SLOTS_KEPT);
        } else {
            self.free.push(slot.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Reply;
    use shoal_types::{ErrorCode, ShoalError};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct CountWakes(AtomicUsize);

    impl Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn err(code: ErrorCode) -> ReplyResult {
        Err(ShoalError::with_detail(code, "test"))
    }

    fn code(r: &ReplyResult) -> Option<ErrorCode> {
        r.as_ref().err().map(|e| e.code)
    }

    #[test]
    fn answers_reach_their_waiter_and_slots_are_reused() {
        let count = Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut t = ReplySlots::default();
        let a = t.open();
        let b = t.open();
        assert_ne!(a, b);
        assert!(t.poll_take(a, &mut cx).is_pending());
        assert!(t.poll_take(a, &mut cx).is_pending(), "polled again");
        // Answered before anyone polled: nothing to wake.
        assert!(t.answer(b, err(ErrorCode::ReceiveTimeout)).is_none());
        t.answer(a, err(ErrorCode::NodeFailureAbort))
            .expect("a's waiter polled")
            .wake();
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        let Poll::Ready(r) = t.poll_take(b, &mut cx) else {
            panic!("b was answered")
        };
        assert_eq!(code(&r), Some(ErrorCode::ReceiveTimeout));
        let Poll::Ready(r) = t.poll_take(a, &mut cx) else {
            panic!("a was answered")
        };
        assert_eq!(code(&r), Some(ErrorCode::NodeFailureAbort));
        assert_eq!(t.in_use(), 0);
        // Freed slots are taken again before the table grows.
        let c = t.open();
        let d = t.open();
        assert!([a, b].contains(&c) && [a, b].contains(&d) && c != d);
        assert_eq!(t.slots.len(), 2);
    }

    #[test]
    fn a_waiter_that_went_away_frees_its_slot_either_way() {
        let mut t = ReplySlots::default();
        // Gone before the answer: the answer frees the slot.
        let a = t.open();
        t.abandon(a);
        assert_eq!(t.in_use(), 1);
        assert!(t
            .answer(a, Ok(Reply::TakenOver { committed: true }))
            .is_none());
        assert_eq!(t.in_use(), 0);
        // Gone after the answer: leaving frees it.
        let b = t.open();
        assert!(t.answer(b, err(ErrorCode::ReceiveTimeout)).is_none());
        t.abandon(b);
        assert_eq!(t.in_use(), 0);
        assert_eq!(t.free.len(), t.slots.len());
    }

    #[test]
    fn shrinks_after_a_burst() {
        let mut t = ReplySlots::default();
        let burst: Vec<ReplySlot> = (0..SLOTS_KEPT + 10).map(|_| t.open()).collect();
        for &s in &burst {
            t.abandon(s);
        }
        for s in burst {
            assert!(t.answer(s, err(ErrorCode::ReceiveTimeout)).is_none());
        }
        assert_eq!(t.in_use(), 0);
        assert!(t.slots.is_empty() && t.free.is_empty());
        assert!(t.slots.capacity() <= SLOTS_KEPT);
    }

    #[test]
    #[should_panic(expected = "answered twice")]
    fn answering_twice_is_a_bug() {
        let mut t = ReplySlots::default();
        let a = t.open();
        let _ = t.answer(a, err(ErrorCode::ReceiveTimeout));
        let _ = t.answer(a, err(ErrorCode::ReceiveTimeout));
    }
}
