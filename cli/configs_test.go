package cli

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/edged"
	"github.com/jackc/pgx/v5/pgxpool"
)

// templates are configs/ loaded with the parsers of the programs that read them.
type templates struct {
	controld controld.Config
	variants map[string]controld.Config // controld-*.toml by file name
	edged    edged.Config
	armor    map[string]*config.File // by file name
	units    map[string]unit         // by file name
	deploy   deployment              // configs/deploy/
}

// deployment is configs/deploy/: two controld replicas on PostgreSQL and N edges, each
// kind of node with one file.
type deployment struct {
	controld controld.Config
	edged    edged.Config
	armor    *config.File
	sql      string // postgres.sql
}

// load reads one file of configs/deploy/ with its real parser.
func (d *deployment) load(p string) (err error) {
	switch filepath.Base(p) {
	case "controld.toml":
		d.controld, err = controld.LoadConfig(p)
	case "edged.toml":
		d.edged, err = edged.LoadConfig(p)
	case "armor.toml":
		d.armor, err = config.Load(p)
	case "postgres.sql":
		var b []byte
		b, err = os.ReadFile(p)
		d.sql = string(b)
	default:
		err = errors.New("no check reads this file of the deployment; add one to deployment.load")
	}
	return err
}

// loadTemplates loads every file under configs/ with its real parser; a file no check
// knows how to read fails, so a new template is never left unchecked.
func loadTemplates(t *testing.T) templates {
	t.Helper()
	tp := templates{armor: map[string]*config.File{}, units: map[string]unit{}, variants: map[string]controld.Config{}}
	err := filepath.WalkDir("../configs", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := filepath.Base(p)
		switch {
		case filepath.Base(filepath.Dir(p)) == "deploy":
			err = tp.deploy.load(p)
		case name == "controld.toml":
			tp.controld, err = controld.LoadConfig(p)
		case strings.HasPrefix(name, "controld-") && strings.HasSuffix(name, ".toml"):
			tp.variants[name], err = controld.LoadConfig(p) // variants of controld.toml, such as a replica's
		case name == "edged.toml":
			tp.edged, err = edged.LoadConfig(p)
		case strings.HasPrefix(name, "armor") && strings.HasSuffix(name, ".toml"):
			tp.armor[name], err = config.Load(p)
		case strings.HasSuffix(name, ".service"):
			tp.units[name], err = readUnit(p)
		case strings.HasSuffix(name, ".yml") && filepath.Base(filepath.Dir(p)) == "ci":
			// TestCIRecipes runs their armor commands as a runner would.
		case strings.HasSuffix(name, ".sh") && filepath.Base(filepath.Dir(p)) == "demo":
			// The demo's scripts run in make demo-check; their comments in TestDocCommands.
		case filepath.Base(filepath.Dir(p)) == "cdn":
			err = checkCDN(p)
		default:
			t.Errorf("%s: no check reads this file; add one to loadTemplates", p)
		}
		if err != nil {
			t.Errorf("load %s: %v", p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.armor) < 2 || len(tp.units) < 2 || tp.controld.Listen == "" || tp.edged.Listen == "" ||
		tp.deploy.armor == nil || tp.deploy.controld.Listen == "" || tp.deploy.edged.Listen == "" || tp.deploy.sql == "" {
		t.Fatalf("configs/ lacks a template: armor %d, units %d", len(tp.armor), len(tp.units))
	}
	return tp
}

// TestConfigsAgree checks that the templates under configs/ describe one deployment:
// every client of controld names the address controld.toml listens on (and https only
// when TLS is on), edged reads the store controld checks, and no two listeners share a
// port.
func TestConfigsAgree(t *testing.T) {
	tp := loadTemplates(t)
	c := tp.controld
	checkControldURL(t, "edged.toml controld", tp.edged.Controld, c)
	for name, f := range tp.armor {
		checkControldURL(t, name+" [controld] url", f.Controld.URL, c)
	}
	if tp.edged.Store != c.Store {
		t.Errorf("edged.toml store %q, controld.toml store %q: the edge must read the store controld checks", tp.edged.Store, c.Store)
	}
	if f := tp.armor["armor.toml"]; f != nil && f.Remote() != c.Store {
		t.Errorf("armor.toml pushes to %q, controld.toml checks %q: every push would be refused for missing objects", f.Remote(), c.Store)
	}
	ports := map[string]string{}
	for _, l := range []struct{ what, addr string }{
		{"controld.toml listen", c.Listen}, {"edged.toml listen", tp.edged.Listen}, {"edged.toml admin_listen", tp.edged.AdminListen},
	} {
		_, port, err := net.SplitHostPort(l.addr)
		if err != nil {
			t.Errorf("%s %q: %v", l.what, l.addr, err)
			continue
		}
		if other, ok := ports[port]; ok {
			t.Errorf("%s and %s both use port %s", l.what, other, port)
		}
		ports[port] = l.what
	}
}

// checkControldURL checks that raw, a client's controld URL, reaches the controld that
// c configures.
func checkControldURL(t *testing.T, what, raw string, c controld.Config) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Errorf("%s %q is not a URL", what, raw)
		return
	}
	wantScheme := "http"
	if c.TLSCert != "" {
		wantScheme = "https"
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	lhost, lport, err := net.SplitHostPort(c.Listen)
	if err != nil {
		t.Fatalf("controld.toml listen %q: %v", c.Listen, err)
	}
	if u.Scheme != wantScheme || port != lport || (lhost != "" && lhost != "0.0.0.0" && lhost != "::" && u.Hostname() != lhost) {
		t.Errorf("%s is %q, but controld.toml listens on %s (%s): want %s://%s", what, raw, c.Listen, wantScheme, wantScheme, c.Listen)
	}
}

// TestConfigsS3Store checks that the store string armor-s3.toml tells controld and edged
// to use is the one armor push uploads to.
func TestConfigsS3Store(t *testing.T) {
	tp := loadTemplates(t)
	f := tp.armor["armor-s3.toml"]
	data, err := os.ReadFile("../configs/armor-s3.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#\s*store = "(:s3,[^"]+)"`).FindSubmatch(data)
	if m == nil {
		t.Fatal(`configs/armor-s3.toml: no comment line # store = ":s3,..." giving controld and edged their store`)
	}
	if string(m[1]) != f.Remote() {
		t.Errorf("armor-s3.toml tells controld and edged to read %q, but push uploads to %q", m[1], f.Remote())
	}
}

// unit is what the checks read of a systemd unit: its settings and the install commands
// its header comment gives.
type unit struct {
	settings map[string][]string // key -> values; commented-out settings too
	installs map[string]string   // installed path -> source in the repository
	comments []string            // the text of its comment lines
}

var installLine = regexp.MustCompile(`^install\s+(?:-m\s+\d+\s+)?(\S+)\s+(\S+)$`)

func readUnit(p string) (unit, error) {
	f, err := os.Open(p)
	if err != nil {
		return unit{}, err
	}
	defer f.Close()
	u := unit{settings: map[string][]string{}, installs: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		body := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if strings.HasPrefix(line, "#") {
			u.comments = append(u.comments, body)
		}
		if m := installLine.FindStringSubmatch(body); m != nil {
			u.installs[m[2]] = m[1]
			continue
		}
		if k, v, ok := strings.Cut(body, "="); ok && regexp.MustCompile(`^[A-Z][A-Za-z]+$`).MatchString(k) {
			u.settings[k] = append(u.settings[k], v)
		}
	}
	return u, sc.Err()
}

// TestConfigsUnits checks the systemd units: ExecStart runs the binary the header
// installs, parses with armor's parser, and names a config file that the header installs
// from configs/; the unit's state directory is the daemon's, and the store it is told to
// make writable is the store the daemon reads.
func TestConfigsUnits(t *testing.T) {
	tp := loadTemplates(t)
	for name, u := range tp.units {
		exec := u.settings["ExecStart"]
		if len(exec) != 1 {
			t.Errorf("%s: %d ExecStart lines, want 1", name, len(exec))
			continue
		}
		words := strings.Fields(exec[0])
		if src, ok := u.installs[words[0]]; !ok || src != "bin/armor" {
			t.Errorf("%s: ExecStart runs %s, which the header does not install from bin/armor (installs %v)", name, words[0], u.installs)
		}
		if err := checkArgs(t, words[1:], true); err != nil {
			t.Errorf("%s: ExecStart %q: %v", name, exec[0], err)
			continue
		}
		daemon := words[1]
		cfgPath := flagValue(words, "--config-file")
		src, ok := u.installs[cfgPath]
		if cfgPath == "" || !ok || src != "configs/"+daemon+".toml" {
			t.Errorf("%s: ExecStart reads %q, which the header does not install from configs/%s.toml", name, cfgPath, daemon)
		} else if _, err := os.Stat("../" + src); err != nil {
			t.Errorf("%s: installs %s: %v", name, src, err)
		}
		if dirs := u.settings["ConfigurationDirectory"]; cfgPath != "" && !slices.Contains(dirs, strings.TrimPrefix(path.Dir(cfgPath), "/etc/")) {
			t.Errorf("%s: ConfigurationDirectory %v does not hold %s", name, dirs, cfgPath)
		}
		var state, store string
		switch daemon {
		case "controld":
			state, store = tp.controld.DataDir, tp.controld.Store
		case "edged":
			state, store = tp.edged.StateDir, tp.edged.Store
		default:
			t.Errorf("%s: runs armor %s, neither controld nor edged", name, daemon)
			continue
		}
		if daemon == "edged" {
			checkEdgeToken(t, name, u, tp.edged)
		}
		if dirs := u.settings["StateDirectory"]; !slices.Contains(dirs, strings.TrimPrefix(state, "/var/lib/")) {
			t.Errorf("%s: StateDirectory %v, but %s.toml keeps its state in %s", name, dirs, daemon, state)
		}
		for _, rw := range u.settings["ReadWritePaths"] {
			if rw != store {
				t.Errorf("%s: ReadWritePaths=%s, but %s.toml's store is %s", name, rw, daemon, store)
			}
		}
	}
}

// flagValue returns the value of flag in words ("--flag value" or "--flag=value").
func flagValue(words []string, flag string) string {
	for i, w := range words {
		if w == flag && i+1 < len(words) {
			return words[i+1]
		}
		if v, ok := strings.CutPrefix(w, flag+"="); ok {
			return v
		}
	}
	return ""
}

// readmeSection returns the lines of the README section titled title.
func readmeSection(t *testing.T, title string) []string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## "+title
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("README.md has no section %q", title)
	}
	return out
}

// tokenActions are the actions controld requires of each command's token (controld's
// allow calls; API.md's endpoint table). A command missing here still needs a row in
// the README's table.
var tokenActions = map[string][]string{
	"repos create":    {"admin"},
	"repos show":      {"read"},
	"repos list":      {"read"},
	"tokens create":   {"admin"},
	"tokens list":     {"admin"},
	"tokens revoke":   {"admin"},
	"push":            {"activate", "push"},
	"rollback":        {"activate", "push"},
	"activate":        {"activate"},
	"releases list":   {"read"},
	"releases delete": {"admin"},
	"gc":              {"admin"},
	"status":          {"read"},
	"edged":           {"read"},
}

var actionWord = regexp.MustCompile("`(read|push|activate|admin)`")

// TestREADMETokens checks that the README's table in "Operating controld and edged"
// says which token every command that talks to controld needs: each command with a
// --controld flag (but init, which only writes the URL into armor.toml) and push.
func TestREADMETokens(t *testing.T) {
	table := map[string][]string{}
	for _, line := range readmeSection(t, "Operating controld and edged") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "|") {
			continue
		}
		actions := cells[2]
		if i := strings.IndexAny(actions, "(:"); i >= 0 {
			actions = actions[:i] // the rest qualifies: "(with --no-activate, push alone)"
		}
		var acts []string
		for _, m := range actionWord.FindAllStringSubmatch(actions, -1) {
			acts = append(acts, m[1])
		}
		slices.Sort(acts)
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			if cmd, ok := strings.CutPrefix(m[1], "armor "); ok {
				table[cmd] = acts
			}
		}
	}
	var c CLI
	p, err := newParser(&c)
	if err != nil {
		t.Fatal(err)
	}
	need := []string{"push"}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, ch := range n.Children {
			walk(ch)
		}
		if len(n.Children) > 0 || n.Type != kong.CommandNode || n.Path() == "init" {
			return
		}
		for _, f := range n.Flags {
			if f.Name == "controld" && !slices.Contains(need, n.Path()) {
				need = append(need, n.Path())
			}
		}
	}
	walk(p.Model.Node)
	if len(need) < 8 {
		t.Fatalf("found only %d commands that talk to controld: %v", len(need), need)
	}
	for _, cmd := range need {
		got, ok := table[cmd]
		want := tokenActions[cmd]
		switch {
		case !ok:
			t.Errorf("README's token table does not say which token `armor %s` needs: add it to \"Operating controld and edged\"", cmd)
		case len(got) == 0:
			t.Errorf("README's token table names no action for `armor %s`", cmd)
		case want != nil && !slices.Equal(got, want):
			t.Errorf("README says `armor %s` needs %v, controld requires %v", cmd, got, want)
		}
	}
}

// TestREADMELocalEdge checks that the README says how armor init sets controld's URL and
// how to try a local edge, at the addresses the templates use.
func TestREADMELocalEdge(t *testing.T) {
	tp := loadTemplates(t)
	lines := readmeSection(t, "Operating controld and edged")
	text := strings.Join(lines, "\n")
	var initURL string
	for _, line := range lines {
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			if args := shellWords(m[1]); len(args) > 1 && args[0] == "armor" && args[1] == "init" {
				initURL = flagValue(args, "--controld")
			}
		}
	}
	if initURL == "" {
		t.Error("README does not show `armor init ... --controld URL` setting controld's URL")
	} else {
		checkControldURL(t, "README's armor init --controld", initURL, tp.controld)
	}
	curl := regexp.MustCompile(`curl -H 'Host: ([^']+)' http://([^/\s]+)/dists/`).FindStringSubmatch(text)
	switch {
	case curl == nil:
		t.Error("README does not show curl -H 'Host: ...' http://EDGE/dists/... against a local edge")
	case !slices.Contains(tp.armor["armor.toml"].Repository.Hostnames, curl[1]):
		t.Errorf("README's curl asks for host %s, not a hostname of configs/armor.toml (%v)", curl[1], tp.armor["armor.toml"].Repository.Hostnames)
	case curl[2] != tp.edged.Listen:
		t.Errorf("README's curl reaches %s, edged.toml listens on %s", curl[2], tp.edged.Listen)
	}
	proxy := regexp.MustCompile(`Acquire::http::Proxy=http://([^/\s]+)/`).FindStringSubmatch(text)
	switch {
	case proxy == nil:
		t.Error("README does not show apt's -o Acquire::http::Proxy=http://EDGE/ for a local edge")
	case proxy[1] != tp.edged.Listen:
		t.Errorf("README's apt proxy is %s, edged.toml listens on %s", proxy[1], tp.edged.Listen)
	}
}

// checkEdgeToken checks that the edge unit's header puts the read-only token where
// edged.toml makes edged look: its token_file, else $ARMOR_EDGE_TOKEN in the unit's
// EnvironmentFile.
func checkEdgeToken(t *testing.T, name string, u unit, cfg edged.Config) {
	t.Helper()
	want := cfg.TokenFile
	if want == "" {
		envs := u.settings["EnvironmentFile"]
		if len(envs) != 1 {
			t.Errorf("%s: edged.toml has no token_file, so the token must come from an EnvironmentFile; the unit has %v", name, envs)
			return
		}
		want = edged.TokenEnv + "=<token> in " + strings.TrimPrefix(envs[0], "-")
	}
	for _, c := range u.comments {
		if strings.Contains(c, want) {
			return
		}
	}
	t.Errorf("%s: the header does not say to put the read-only token where edged.toml makes edged read it: %q", name, want)
}

// TestConfigsTokenDataDir checks that every documented offline token command works on
// the data directory controld.toml gives controld, or on the database a variant of it
// (controld-*.toml) names.
func TestConfigsTokenDataDir(t *testing.T) {
	tp := loadTemplates(t)
	files := []string{"../README.md", "../configs/controld.toml", "../configs/armor-controld.service"}
	found := 0
	for _, file := range files {
		for _, c := range docCommands(t, file) {
			if len(c.args) < 2 || c.args[0] != "controld" || c.args[1] != "token" || !c.whole {
				continue
			}
			found++
			if db := flagValue(c.args, "--database"); db != "" {
				known := sameDatabase(tp.deploy.controld.Database, db)
				for _, v := range tp.variants {
					known = known || sameDatabase(v.Database, db)
				}
				if !known {
					t.Errorf("%s: armor controld token --database %q, but neither configs/controld-*.toml nor configs/deploy/controld.toml names that database", c.where, db)
				}
				continue
			}
			if dir := flagValue(c.args, "--data-dir"); dir != tp.controld.DataDir {
				t.Errorf("%s: armor controld token --data-dir %q, but controld.toml's data_dir is %q", c.where, dir, tp.controld.DataDir)
			}
		}
	}
	if found < len(files) {
		t.Errorf("found %d offline token commands in %v, want one in each", found, files)
	}
}

// TestConfigsDeployment checks that configs/deploy/ describes one deployment: edged and
// armor.toml both name every replica, each at the port controld.toml listens on (https
// when TLS is on); controld, the edges and the pushes share one store; postgres.sql makes
// the role and the database that controld's URL names, and the URL's pool settings are
// ones pgx knows; and the README's walkthrough names each file.
func TestConfigsDeployment(t *testing.T) {
	d := loadTemplates(t).deploy
	edges, pushes := strings.Split(d.edged.Controld, ","), strings.Split(d.armor.Controld.URL, ",")
	if len(edges) < 2 {
		t.Errorf("deploy/edged.toml controld %q names %d replica, want two or more", d.edged.Controld, len(edges))
	}
	if !slices.Equal(slices.Sorted(slices.Values(edges)), slices.Sorted(slices.Values(pushes))) {
		t.Errorf("deploy/edged.toml polls %v, deploy/armor.toml pushes through %v: want the same replicas", edges, pushes)
	}
	for _, u := range slices.Concat(edges, pushes) {
		checkControldURL(t, "configs/deploy controld URL", u, d.controld)
	}
	if d.edged.Store != d.controld.Store || d.armor.Remote() != d.controld.Store {
		t.Errorf("deploy stores differ: controld.toml %q, edged.toml %q, armor.toml pushes to %q", d.controld.Store, d.edged.Store, d.armor.Remote())
	}
	_, lport, _ := net.SplitHostPort(d.edged.Listen)
	_, aport, _ := net.SplitHostPort(d.edged.AdminListen)
	if lport == aport {
		t.Errorf("deploy/edged.toml listen %s and admin_listen %s share a port", d.edged.Listen, d.edged.AdminListen)
	}

	pc, err := pgxpool.ParseConfig(d.controld.Database)
	if err != nil {
		t.Fatalf("deploy/controld.toml database: %v", err)
	}
	for k := range pc.ConnConfig.RuntimeParams {
		if strings.HasPrefix(k, "pool_") {
			t.Errorf("deploy/controld.toml database: pgx does not know %s; PostgreSQL would refuse it", k)
		}
	}
	role := regexp.MustCompile(`(?m)^CREATE ROLE (\w+) LOGIN;`).FindStringSubmatch(d.sql)
	db := regexp.MustCompile(`(?m)^CREATE DATABASE (\w+) OWNER (\w+);`).FindStringSubmatch(d.sql)
	switch {
	case role == nil || db == nil:
		t.Errorf("deploy/postgres.sql makes no role (CREATE ROLE x LOGIN;) or no database (CREATE DATABASE x OWNER y;)")
	case role[1] != pc.ConnConfig.User || db[1] != pc.ConnConfig.Database || db[2] != role[1]:
		t.Errorf("deploy/postgres.sql makes role %s and database %s owned by %s; controld.toml connects as %s to %s",
			role[1], db[1], db[2], pc.ConnConfig.User, pc.ConnConfig.Database)
	}
	for _, m := range regexp.MustCompile(`(?m)^ALTER ROLE (\w+) SET`).FindAllStringSubmatch(d.sql, -1) {
		if m[1] != pc.ConnConfig.User {
			t.Errorf("deploy/postgres.sql sets parameters of role %s, but controld connects as %s", m[1], pc.ConnConfig.User)
		}
	}

	section := strings.Join(readmeSection(t, "A deployment: two controld replicas and N edges"), "\n")
	for _, f := range []string{"controld.toml", "edged.toml", "armor.toml", "postgres.sql"} {
		if !strings.Contains(section, "configs/deploy/"+f) {
			t.Errorf("README's deployment section does not name configs/deploy/%s", f)
		}
	}
}

// sameDatabase reports whether two postgres:// URLs reach the same database as the same
// role; their pool and timeout settings may differ.
func sameDatabase(a, b string) bool {
	ca, erra := pgxpool.ParseConfig(a)
	cb, errb := pgxpool.ParseConfig(b)
	if erra != nil || errb != nil {
		return false
	}
	x, y := ca.ConnConfig, cb.ConnConfig
	return x.Host == y.Host && x.Port == y.Port && x.Database == y.Database && x.User == y.User
}

// checkCDN checks a file of configs/cdn/: varnish.vcl runs as shipped in TestCDN; the
// VCL for Fastly must keep the rules varnish.vcl has (the immutable paths, the retry on
// another edge, one cache key per path); the documents' commands are TestDocCommands'.
func checkCDN(p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	s := string(b)
	var want []string
	switch filepath.Base(p) {
	case "varnish.vcl":
		want = []string{"# BEGIN BACKENDS", "# END BACKENDS", `"/(by-hash|pool)/"`, "return (purge)", "immutable"}
	case "fastly.vcl":
		want = []string{"#FASTLY recv", "#FASTLY fetch", `"/(by-hash|pool)/"`, "querystring.remove", "immutable", "restart"}
	case "README.md", "cloudflare.md":
		want = []string{"max-age=31536000, immutable", "max-age=60", "no-store"}
	default:
		return errors.New("no check reads this file of configs/cdn; add one to checkCDN")
	}
	for _, w := range want {
		if !strings.Contains(s, w) {
			return fmt.Errorf("lacks %q", w)
		}
	}
	return nil
}
