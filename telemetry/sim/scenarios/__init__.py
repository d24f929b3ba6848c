"""Built-in simulator scenarios (YAML); a package so that wheels ship them."""
