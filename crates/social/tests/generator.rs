//! The generator: the same seed gives the same network, another seed another; the paper's
//! counts and friend-degree distribution at paper size.

use espalier_social::{generate, Size};

#[test]
fn the_same_seed_gives_the_same_network() {
    let a = generate(Size::Tiny, 7).unwrap();
    let b = generate(Size::Tiny, 7).unwrap();
    let c = generate(Size::Tiny, 8).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn paper_size_has_the_papers_counts_and_degrees() {
    let net = generate(Size::Paper, espalier_social::SEED).unwrap();
    assert_eq!(net.people.len(), 2011);
    assert_eq!(net.messages.len(), 26_982);
    assert_eq!(net.activity_count(), 25_365);
    assert_eq!(net.addresses.len(), 2000);
    assert_eq!(net.groups.len(), 200);
    assert_eq!(net.organisations.len(), 100);
    let d = net.degrees();
    println!("{d:?}");
    assert_eq!(d.max, 667, "{d:?}");
    assert!(d.min >= 1, "{d:?}");
    assert!((23.0..=27.0).contains(&d.mean), "mean friends {d:?}");
    assert!((11..=13).contains(&d.median), "median friends {d:?}");
    assert!(d.under_65 >= 0.9, "90% under 65: {d:?}");
    assert!((23_000..=27_000).contains(&d.friendships), "about 25,000 friendships: {d:?}");
    // Friendship is symmetric and never with oneself; messages go to a friend.
    for (i, p) in net.people.iter().enumerate() {
        assert!(!p.friends.contains(&i));
        for &f in &p.friends {
            assert!(net.people[f].friends.binary_search(&i).is_ok(), "{i} -> {f} one way only");
        }
    }
    for m in &net.messages {
        assert!(net.people[m.from].friends.binary_search(&m.to).is_ok());
    }
}

#[test]
fn other_seeds_keep_the_distribution() {
    for seed in [1, 2, 3] {
        let d = generate(Size::Paper, seed).unwrap().degrees();
        assert_eq!(d.max, 667, "seed {seed}: {d:?}");
        assert!((21.0..=29.0).contains(&d.mean) && (10..=14).contains(&d.median), "seed {seed}: {d:?}");
        assert!(d.min >= 1 && d.under_65 >= 0.88, "seed {seed}: {d:?}");
    }
}
