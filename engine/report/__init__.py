"""Layer 5, reports: typed summary blocks rendered once each as markdown, console and HTML."""
