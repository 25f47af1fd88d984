@preconcurrency import Glibc
import PushInboxMain

// Thin: everything lives in PushInboxMain so the tests can reach it.
exit(InboxServerMain.main(Array(CommandLine.arguments.dropFirst())))
