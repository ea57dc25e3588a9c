// tidy-fixture: as src/gpu/planted.rs
// Printing from library code.

use std::io::Write;

fn phases(out: &mut impl Write, ms: f64) {
    eprintln!("phase: {ms} ms"); // tidy-expect: print
    println!("done"); // tidy-expect: print
    print!("x"); // tidy-expect: print
    eprint!("y"); // tidy-expect: print
    let v = dbg!(ms * 2.0); // tidy-expect: print
    let _ = writeln!(out, "to a writer the caller chose: fine");
    tracing::info!(ms, "a log line: fine");
    let text = "println!(\"in a string\")";
    // println!("in a comment");
}

#[cfg(test)]
fn test_helper() {
    println!("test code may print");
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    #[test]
    fn prints_in_tests_are_fine() {
        println!("test output: fine");
    }
}

fn after_the_tests() {
    println!("library code again"); // tidy-expect: print
}
