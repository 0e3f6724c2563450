// Package aptsources writes the deb822 .sources entry of an APT repository
// (sources.list(5), "DEB822-STYLE FORMAT"): the one entry the repository page shows, the
// README documents and the keyring package ships as a conffile. The page and the package
// make it with this one function, so a user who followed the page and then installs the
// keyring package has the very bytes dpkg is about to write, and dpkg asks nothing.
//
// Each suite is named once, by the directory it is published under (its codename; an
// alias such as dists/stable beside dists/bookworm serves the same files, and naming both
// makes apt fetch every index twice and list every package twice).
package aptsources
