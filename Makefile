# armor: build, test, benchmark, lint and demo. Every target installs what it needs,
# and only when it is missing (.ci/install-deps).

GO      ?= go
BIN     := bin
ARMOR   := $(BIN)/armor
S3      := $(BIN)/s3server
PKGS    := ./...
RACE    := ./controld/... ./edged/... ./store/... ./publish/... ./gen
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build build-all deb test test-race bench lint demo demo-stop demo-check deps clean fuzz

all: build

deps:
	@.ci/install-deps
	@$(GO) mod download

build: $(ARMOR)

# armor version prints the module version and the commit. cmd/go stamps them (vcs.revision,
# vcs.modified; -trimpath keeps them) only with -buildvcs on and when .git is a directory,
# so not in a git worktree: the linker flags give the same from git as a fallback.
GIT_COMMIT   := $(shell git rev-parse HEAD 2>/dev/null)
GIT_MODIFIED := $(shell if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then echo true; else echo false; fi)
GIT_VERSION  := $(shell git describe --tags --dirty 2>/dev/null)
VERSION_LDFLAGS := -X github.com/armor-apt/armor/cli.linkCommit=$(GIT_COMMIT) \
	-X github.com/armor-apt/armor/cli.linkModified=$(GIT_MODIFIED) \
	-X github.com/armor-apt/armor/cli.linkVersion=$(GIT_VERSION)

$(ARMOR): FORCE
	$(GO) build -trimpath -buildvcs=auto -ldflags '$(VERSION_LDFLAGS)' -o $(ARMOR) ./cli/armor

# The default binary carries rclone's local and s3 backends (a build of about two minutes);
# build-all carries every rclone backend (GCS, Azure, B2, SFTP, ...; about four and a half).
# A store on a backend the binary lacks fails, naming the backend and this target.
build-all:
	$(GO) build -trimpath -buildvcs=auto -tags allbackends -ldflags '$(VERSION_LDFLAGS)' -o $(ARMOR) ./cli/armor

# deb packages armor for the servers that run controld and edged: every rclone backend,
# /usr/bin/armor, the systemd units, /etc/armor/*.toml (conffiles) and the armor system
# user (cmd/mkdeb). Without a tag, the version is 0.0~git<date>.<commit>.
DEB_VERSION ?= $(or $(patsubst v%,%,$(GIT_VERSION)),0.0~git$(shell git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null).$(shell git rev-parse --short HEAD 2>/dev/null))
deb: build-all
	$(GO) run ./cmd/mkdeb -binary $(ARMOR) -version '$(DEB_VERSION)' -arch $(shell dpkg --print-architecture) -out $(BIN)

# A real S3 server for the store tests: rclone's own `serve s3`, built from its Go module
# with the local backend only, so it builds in a fraction of rclone's full time.
$(S3): go.sum $(wildcard cmd/s3server/*.go)
	$(GO) build -o $(S3) ./cmd/s3server

test: deps build $(S3)
	ARMOR_S3SERVER=$(CURDIR)/$(S3) ARMOR_BIN=$(CURDIR)/$(ARMOR) $(GO) test -count=1 -timeout 40m $(PKGS)
	ARMOR_S3SERVER=$(CURDIR)/$(S3) $(GO) test -count=1 -race -timeout 30m $(RACE)
	@configs/demo/check.sh

bench: deps build $(S3)
	ARMOR_S3SERVER=$(CURDIR)/$(S3) ARMOR_BIN=$(CURDIR)/$(ARMOR) $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m $(PKGS)

fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 20s $$pkg || exit 1; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

# The whole pipeline on one machine: build a demo repository, start controld and edged,
# push, and check with a real apt-get through the edge. DEMO_DEBS=dir uses your .debs.
demo: deps build
	@configs/demo/run.sh

demo-stop:
	@configs/demo/run.sh stop

# The demo's own checks, in a throwaway directory: taken ports, a daemon dying at start, a re-run.
demo-check: deps build
	@configs/demo/check.sh

clean:
	rm -rf $(BIN) demo

FORCE:
