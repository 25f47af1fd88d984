@preconcurrency import Glibc
import PushInboxServer

// Thin: everything lives in PushInboxServer so the tests can reach it.
exit(InboxServerMain.main(Array(CommandLine.arguments.dropFirst())))
