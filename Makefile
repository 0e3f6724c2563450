# armor: build, test, benchmark, lint and demo. Every target installs what it needs,
# and only when it is missing (.ci/install-deps).

GO      ?= go
BIN     := bin
ARMOR   := $(BIN)/armor
S3      := $(BIN)/s3server
PKGS    := ./...
RACE    := ./controld/... ./edged/... ./store/... ./publish/... ./gen
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build build-all deb dist test test-race bench lint demo demo-stop demo-check deps clean fuzz

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
DEB_ARCH    := $(shell dpkg --print-architecture 2>/dev/null)
deb: build-all
	$(GO) run ./cmd/mkdeb -binary $(ARMOR) -version '$(DEB_VERSION)' -arch $(DEB_ARCH) -out $(BIN)

# dist makes what a user downloads, in bin/dist: armor_<version>_linux_<arch>.tar.gz (the
# binary with every rclone backend, README.md, configs/ without the demo), the .deb
# beside it, and SHA256SUMS of both. It first checks that the binary says it carries
# every backend (armor version), as a user can.
DIST      := $(BIN)/dist
DIST_NAME := armor_$(DEB_VERSION)_linux_$(DEB_ARCH)
dist: deb
	$(GO) test -count=1 -tags allbackends -run '^TestBackendsAll$$' ./store/
	@$(ARMOR) version | grep -q '^rclone backends: all ' || { echo "dist: $(ARMOR) does not carry every rclone backend:"; $(ARMOR) version; exit 1; }
	rm -rf $(DIST) && mkdir -p $(DIST)/$(DIST_NAME)
	cp $(ARMOR) README.md $(DIST)/$(DIST_NAME)/
	cp -R configs $(DIST)/$(DIST_NAME)/configs && rm -rf $(DIST)/$(DIST_NAME)/configs/demo
	tar -C $(DIST) --sort=name --owner=0 --group=0 --numeric-owner --mtime='@$(shell git log -1 --format=%ct 2>/dev/null || echo 0)' \
		-czf $(DIST)/$(DIST_NAME).tar.gz $(DIST_NAME)
	rm -rf $(DIST)/$(DIST_NAME)
	cp $(BIN)/armor_$(DEB_VERSION)_$(DEB_ARCH).deb $(DIST)/
	cd $(DIST) && sha256sum $(DIST_NAME).tar.gz armor_$(DEB_VERSION)_$(DEB_ARCH).deb > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

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
