//! `java.util.Random`, reimplemented from its documented algorithm (a 48-bit linear
//! congruential generator, Knuth vol. 2 §3.2.1), so that the generator makes the same choices
//! as the official Java one and reproduces its models exactly.

const MULTIPLIER: i64 = 0x5_DEEC_E66D;
const ADDEND: i64 = 0xB;
const MASK: i64 = (1 << 48) - 1;

/// A `java.util.Random` stream: the same seed gives the same values as Java's.
#[derive(Debug, Clone)]
pub struct JavaRandom {
    seed: i64,
}

impl JavaRandom {
    /// The stream Java's `new Random(seed)` gives.
    pub fn new(seed: i64) -> JavaRandom {
        JavaRandom { seed: (seed ^ MULTIPLIER) & MASK }
    }

    fn next(&mut self, bits: u32) -> i32 {
        self.seed = self.seed.wrapping_mul(MULTIPLIER).wrapping_add(ADDEND) & MASK;
        (self.seed >> (48 - bits)) as i32
    }

    /// A uniform value in `0..bound` (`bound > 0`), drawn exactly as Java draws it.
    pub fn next_int(&mut self, bound: i32) -> i32 {
        assert!(bound > 0, "bound must be positive");
        let mut r = self.next(31);
        let m = bound - 1;
        if bound & m == 0 {
            // A power of two: the high bits.
            return ((bound as i64 * r as i64) >> 31) as i32;
        }
        // Reject the values of the last, partial interval (32-bit wrapping, as in Java).
        let mut u = r;
        loop {
            r = u % bound;
            if u.wrapping_sub(r).wrapping_add(m) >= 0 {
                return r;
            }
            u = self.next(31);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JavaRandom;

    #[test]
    fn matches_java() {
        // Printed by Java 17: new Random(42).nextInt(10) five times, and the generator's seed
        // with nextInt(19) (the switch positions per route).
        let mut r = JavaRandom::new(42);
        let got: Vec<i32> = (0..5).map(|_| r.next_int(10)).collect();
        assert_eq!(got, [0, 3, 8, 4, 0]);
        let mut r = JavaRandom::new(19_871_053);
        let got: Vec<i32> = (0..5).map(|_| r.next_int(19)).collect();
        assert_eq!(got, [0, 0, 3, 13, 4]);
        // A power-of-two bound takes the high bits.
        let mut r = JavaRandom::new(1);
        assert!((0..100).all(|_| (0..1024).contains(&r.next_int(1024))));
    }
}
