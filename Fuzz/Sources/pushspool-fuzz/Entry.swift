// One binary for every target (one fuzz build, one link): `FUZZ_TARGET=<name>` picks the
// target, named as in `FuzzTargets.names`; the rest of the command line is libFuzzer's.
import Glibc
import PushFuzzTargets

nonisolated(unsafe) private var target = ""

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    guard let name = getenv("FUZZ_TARGET").map({ String(cString: $0) }), FuzzTargets.names.contains(name) else {
        let message = "pushspool-fuzz: set FUZZ_TARGET to one of: \(FuzzTargets.names.joined(separator: " "))\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        exit(64)
    }
    target = name
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        try FuzzTargets.run(target, bytes)
    } catch {
        // A broken invariant is a finding like a crash: libFuzzer saves the input on the trap.
        fatalError("\(error)")
    }
    return 0
}
