import OutboxFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func test(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    FuzzTargets.all["cli"]!(Array(UnsafeRawBufferPointer(start: start, count: count)))
    return 0
}
