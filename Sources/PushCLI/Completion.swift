/// The bash completion of a program, written from its table: subcommand words, options,
/// and what each value or operand completes to.
package enum BashCompletion {
    /// A bash word list: our names and words hold no quotes (the tables are ours).
    static func words(_ list: [String]) -> String { list.joined(separator: " ") }

    static func completionCode(_ completion: ValueCompletion, function: String) -> String? {
        switch completion {
        case .none: nil
        case .file(let suffix?): "_filedir \(suffix)"
        case .file(nil): "_filedir"
        case .directory: "_filedir -d"
        case .words(let list): "COMPREPLY=($(compgen -W '\(words(list))' -- \"$cur\"))"
        case .programOutput(let arguments, let plus):
            "COMPREPLY=($(compgen -W \"\(words(plus + [""]))$(\(function)_run \(words(arguments)))\" -- \"$cur\"))"
        }
    }

    /// The whole script for `program`.
    package static func script<Target>(for program: Program<Target>) -> String {
        let function = "_" + program.name.map { $0.isLetter || $0.isNumber ? $0 : "_" }.map(String.init).joined()
        let commands = program.root.all()
        func key(_ path: [String]) -> String { "\"" + path.joined(separator: " ") + "\"" }
        var out = """
            # bash completion for \(program.name)                                  -*- shell-script -*-
            # Generated from \(program.name)'s option table by scripts/gen-docs.sh; do not edit.
            # Completes subcommands, options and their values, and operands.

            # The words of the command path ($1) below which a word is a subcommand.
            \(function)_subcommands()
            {
                case $1 in

            """
        for (path, command) in commands where !command.subcommands.isEmpty {
            out += "        \(key(path))) echo '\(words(command.subcommands.map(\.name) + (path.isEmpty && program.helpCommand ? ["help"] : [])))' ;;\n"
        }
        out += """
                esac
            }

            # The options of the command at path $1; with $2 = value, only those taking a value.
            \(function)_options()
            {
                case $1 in

            """
        for (path, command) in commands {
            let visible = command.options.filter { !$0.hidden }
            let all = visible.flatMap(\.names) + ["--help"] + (path.isEmpty ? ["--version"] : [])
            let valued = visible.filter(\.takesValue).flatMap(\.names)
            out += "        \(key(path))) [[ $2 == value ]] && echo '\(words(valued))' || echo '\(words(all))' ;;\n"
        }
        out += """
                esac
            }

            # Completes the value of option $2 of the command at path $1.
            \(function)_value()
            {
                case "$1|$2" in

            """
        for (path, command) in commands {
            for option in command.options where !option.hidden && option.takesValue {
                guard let code = completionCode(option.completion, function: function) else { continue }
                let patterns = option.names.map { "\"\(path.joined(separator: " "))|\($0)\"" }.joined(separator: " | ")
                out += "        \(patterns)) \(code) ;;\n"
            }
        }
        out += """
                esac
            }

            # Completes operand number $2 (from 0) of the command at path $1.
            \(function)_operand()
            {
                case $1 in

            """
        for (path, command) in commands where command.subcommands.isEmpty && !command.positionals.isEmpty {
            var cases: [String] = []
            for (position, positional) in command.positionals.enumerated() {
                guard let code = completionCode(positional.completion, function: function) else { continue }
                cases.append(positional.repeated ? "*) \(code) ;;" : "\(position)) \(code) ;;")
            }
            guard !cases.isEmpty else { continue }
            out += "        \(key(path))) case $2 in \(cases.joined(separator: " ")) esac ;;\n"
        }
        let rootValued = program.root.options.filter(\.takesValue).flatMap(\.names)
        out += """
                esac
            }

            # Runs the program with the global options given on the line; first column only.
            \(function)_run()
            {
                local -a globals=()
                local i
                for ((i = 1; i < ${#words[@]} - 1; i++)); do
                    case ${words[i]} in
                        \(rootValued.isEmpty ? "--none-" : rootValued.joined(separator: " | "))) globals+=("${words[i]}" "${words[i + 1]}") ;;
                        \(rootValued.isEmpty ? "--none-=*" : rootValued.map { $0 + "=*" }.joined(separator: " | "))) globals+=("${words[i]}") ;;
                    esac
                done
                "${words[0]}" "${globals[@]}" "$@" 2>/dev/null | cut -f1
            }

            \(function)()
            {
                local cur prev words cword
                _init_completion -s || return

                # Walk the line: the command path, and how many operands precede the cursor.
                local path="" word i operands=0 dashdash=0 subs valued
                for ((i = 1; i < cword; i++)); do
                    word=${words[i]}
                    if ((!dashdash)) && [[ $word == -- ]]; then
                        dashdash=1
                    elif ((!dashdash)) && [[ $word == -?* ]]; then
                        valued=" $(\(function)_options "$path" value) "
                        [[ $word != *=* && $valued == *" $word "* ]] && ((i++))
                    else
                        subs=" $(\(function)_subcommands "$path") "
                        if [[ -z $path && $word == help ]]; then
                            continue
                        elif [[ $subs != "  " && $subs == *" $word "* ]]; then
                            path="${path:+$path }$word"
                        else
                            ((operands++))
                        fi
                    fi
                done

                valued=" $(\(function)_options "$path" value) "
                if ((!dashdash)) && [[ $valued == *" $prev "* ]]; then
                    \(function)_value "$path" "$prev"
                    return
                fi
                [[ $cur == --*=* ]] && return
                if ((!dashdash)) && [[ $cur == -* ]]; then
                    COMPREPLY=($(compgen -W "$(\(function)_options "$path")" -- "$cur"))
                    return
                fi
                subs=$(\(function)_subcommands "$path")
                if [[ -n $subs ]]; then
                    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
                    return
                fi
                \(function)_operand "$path" "$operands"
            } &&
                complete -F \(function) \(program.name)

            """
        return out
    }
}
