import PushspoolDaemon
import Glibc

exit(PushspoolDaemonMain.main(CommandLine.arguments))
