package main

// Examples shown by `sandhold COMMAND --help` (kong.HelpProvider; go/doc
// formatting: indented lines stay as they are). Sandboxes are named by
// name, id, or a unique id prefix.

func (clientLoginCmd) Help() string {
	return `Examples:

    sandhold login http://127.0.0.1:8080             # prompts for the key
    pass show sandhold | sandhold login https://sh.example --key-stdin --sandbox demo

The key is kept 0600 in $XDG_CONFIG_HOME/sandhold/client.json; SANDHOLD_URL,
SANDHOLD_KEY and SANDHOLD_SANDBOX override it.`
}

func (clientLsCmd) Help() string {
	return `Examples:

    sandhold ls
    sandhold ls --json | jq -r '.[].name'`
}

func (clientCreateCmd) Help() string {
	return `Examples:

    sandhold create --name demo
    sandhold create --name build --memory 2GiB --cpu 2 --cpu-time 5m --disk 10GiB --ttl 4h
    sandhold create --name web --network proxy --allow pypi.org --allow '*.pythonhosted.org'

Limits above the server's maxima are refused (docs/limits.md says how to raise them).`
}

func (clientRmCmd) Help() string {
	return `Examples:

    sandhold rm demo
    sandhold rm sb3f2a build`
}

func (clientExecCmd) Help() string {
	return `Examples:

    sandhold exec demo -- python3 -c 'print(6*7)'
    sandhold exec demo --timeout 300 -e CI=1 -- make test
    sandhold exec -i demo -- wc -l < data.csv
    CID=$(sandhold exec -d demo -- make -j2); sandhold logs -f demo $CID
    sandhold exec --wait-approval demo -- terraform apply

Exit status: the command's own; 124 when it ran past its wall limit; 152 past
its CPU time limit; 137 killed (a kill, or out of memory); 127 the command is
not in the sandbox; 75 it waits for an operator's approval; 77 an operator
denied it. sandhold says on stderr which limit ended a command and how to
raise it.`
}

func (clientShellCmd) Help() string {
	return `Examples:

    sandhold shell demo
    sandhold shell demo --session sess_…     # reattach

Ctrl-P Ctrl-Q detaches and leaves the shell running (its session id is
printed); Ctrl-C and everything else go to the sandbox.`
}

func (clientCpCmd) Help() string {
	return `Examples:

    sandhold cp ./big.tar demo:/workspace/          # into a directory (made if missing)
    sandhold cp demo:/workspace/out.tgz ./
    sandhold cp --limit-rate 20MiB ./big.tar demo:data/
    sandhold cp ./notes.md :/workspace/             # the default sandbox

Copies resume where they stopped when run again, and are checked with SHA-256.`
}

func (clientLogsCmd) Help() string {
	return `Examples:

    sandhold logs -f demo 3f2a9c1e-1
    sandhold logs 3f2a9c1e-1                         # the default sandbox`
}

func (keysCmd) Help() string {
	return `On the server you are logged in to (admin key), or with --data-dir (or
SANDBOX_DATA_DIR) in that data dir on the server's machine.

    sandhold keys create --name ci --role agent
    sandhold keys list
    sandhold keys revoke key_…`
}

func (auditCmd) Help() string {
	return `Of the server you are logged in to (agents: their own records), or with
--data-dir (or SANDBOX_DATA_DIR) of that data dir on the server's machine.

    sandhold audit tail -n 50
    sandhold audit tail -f --action exec
    sandhold audit verify`
}

func (mcpCmd) Help() string {
	return `For an MCP client that starts a command, after sandhold login:

    {"mcpServers": {"sandhold": {"command": "sandhold", "args": ["mcp"]}}}`
}
