//! Memory accounting against the node's configured `data_memory`.

/// Size of one row-store page (as in NDB, 32 KiB).
pub const PAGE_BYTES: usize = 32 * 1024;

/// The allocation did not fit in `data_memory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    pub requested_bytes: usize,
    pub free_bytes: usize,
}

/// The node-wide memory budget. Single-threaded: one per data node worker.
#[derive(Debug)]
pub struct Memory {
    limit_bytes: usize,
    used_bytes: usize,
}

impl Memory {
    pub fn new(limit_bytes: usize) -> Self {
        Memory {
            limit_bytes,
            used_bytes: 0,
        }
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    pub fn free_bytes(&self) -> usize {
        self.limit_bytes - self.used_bytes
    }

    /// Charges `bytes` or fails without charging anything.
    pub fn try_charge(&mut self, bytes: usize) -> Result<(), OutOfMemory> {
        if bytes > self.free_bytes() {
            return Err(OutOfMemory {
                requested_bytes: bytes,
                free_bytes: self.free_bytes(),
            });
        }
        self.used_bytes += bytes;
        Ok(())
    }

    /// Returns `bytes` charged earlier.
    pub fn release(&mut self, bytes: usize) {
        assert!(
            bytes <= self.used_bytes,
            "released more memory than charged"
        );
        self.used_bytes -= bytes;
    }
}
