// A 64x48 JPEG and WebP (libvips, the same images as PushMediaTests' Fixtures), embedded so the
// fetcher's decode-under-seccomp test needs no resource bundle.
import Foundation

enum ImageFixtures {
    static let jpeg: [UInt8] = decode("""
        /9j/2wBDAAoHBwgHBgoICAgLCgoLDhgQDg0NDh0VFhEYIx8lJCIfIiEmKzcvJik0KSEiMEExNDk7Pj4+JS5ESUM8SDc9Pjv/2wBD
        AQoLCw4NDhwQEBw7KCIoOzs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozs7Ozv/wAARCAAwAEAD
        ASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEG
        E1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4
        eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6
        /8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEI
        FEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaH
        iImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIR
        AxEAPwDxsLTwtKFp4WhMExAtOC0oWnha0TNUxAtPC0oWnBa1TNkxAtPC0oWnha0TNUygFp4WlC04LXnJnlJiBaeFpQtPC1omapjQ
        tPC0oWnha0TNUxAtOC0oWnha1TNkygFp4WlC08LXmpnkpiBacFpwWnBa1TNkxAtPC0oWnBa0TNUxAtPC0oWnha0TNUz/2Q==
        """)
    static let webp: [UInt8] = decode("""
        UklGRkIBAABXRUJQVlA4WAoAAAAIAAAAPwAALwAAVlA4IGIAAADwAwCdASpAADAAPp1Ook0lpCMiIqgAsBOJZwC+822AxTyrT08S
        4ZgAAP73GYplcj4diiKndDLs1KXT3YhFL8pwmy3Zddyvv//XDBN1Y65P5cRFAYOjkCHCeQ//igrmAAAAAEVYSUa6AAAARXhpZgAA
        SUkqAAgAAAAGABIBAwABAAAAAQAAABoBBQABAAAAVgAAABsBBQABAAAAXgAAACgBAwABAAAAAgAAABMCAwABAAAAAQAAAGmHBAAB
        AAAAZgAAAAAAAAA4YwAA6AMAADhjAADoAwAABgAAkAcABAAAADAyMTABkQcABAAAAAECAwAAoAcABAAAADAxMDABoAMAAQAAAP//
        AAACoAQAAQAAAEAAAAADoAQAAQAAADAAAAAAAAAA
        """)

    private static func decode(_ text: String) -> [UInt8] {
        Array(Data(base64Encoded: text.replacingOccurrences(of: "\n", with: ""))!)
    }
}
