// tidy-fixture: as tests/planted.rs
// Tests that pass without testing.

fn helper_may_return_early(x: u32) -> u32 {
    if x == 0 {
        eprintln!("nothing to do");
        return 0;
    }
    x
}

fn helper_of_a_test(device: bool) {
    if !device {
        eprintln!("skipped: no device; the test was not run"); // tidy-expect: vacuous
        return;
    }
}

#[test]
fn prints_and_returns() {
    if !cfg!(target_feature = "avx512ifma") {
        println!("no IFMA here"); // tidy-expect: vacuous
        return;
    }
    assert_eq!(helper_may_return_early(1), 1);
}

#[test]
fn says_it_skipped_over_lines() {
    if std::path::Path::new("/nope").exists() {
        eprintln!( // tidy-expect: vacuous
            "Skipping the check: {}",
            "no device"
        );
        return;
    }
}

#[test]
fn says_skipped_without_returning() {
    eprintln!("skipped half of it"); // tidy-expect: vacuous
    assert!(true);
}

#[test]
#[ignore = "needs a device: fine, it is reported as ignored"]
fn ignored_and_asserting() {
    assert!(std::path::Path::new("/dev/null").exists(), "needs /dev/null");
    println!("measured 3 ms");
}

#[test]
fn returns_without_printing() {
    for x in 0..3 {
        if x == 2 {
            return;
        }
    }
}

#[test]
fn prints_a_result_and_ends() {
    let n = 2 + 2;
    println!("n = {n}");
    assert_eq!(n, 4);
}
