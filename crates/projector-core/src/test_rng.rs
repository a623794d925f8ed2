//! A seeded pseudo-random source for the core's property tests (the
//! projection's, compact JSON's): the same seed always gives the same
//! sequence, so a failure replays.

/// `next(n)`: the next value in `0..n`, from a linear congruential
/// generator started at `state`.
pub fn lcg(mut state: u64) -> impl FnMut(usize) -> usize {
    move |n| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % n
    }
}
