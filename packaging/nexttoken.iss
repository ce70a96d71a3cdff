; Inno Setup 6 script: a per-user Windows installer for the one-folder build in dist\nexttoken\.
;
;   python packaging\build.py
;   "%ProgramFiles(x86)%\Inno Setup 6\ISCC.exe" /DAppVersion=0.1.0 packaging\nexttoken.iss
;
; Output: dist\nexttoken-<version>-windows-x64-setup.exe. It installs for the current user only
; (%LOCALAPPDATA%\Programs\nexttoken, no administrator rights), adds a Start-menu shortcut and, if
; ticked, a desktop shortcut, and registers an uninstaller (Settings > Apps, or the Start menu).
; Paths below are relative to this file's folder. The GitHub workflow .github/workflows/installers.yml
; runs this; it has not been run on a Windows machine by hand.

#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif

[Setup]
AppId={{DAFDAC2B-9968-4629-BE7D-D65713AEF3CB}
AppName=nexttoken
AppVersion={#AppVersion}
AppVerName=nexttoken {#AppVersion}
AppPublisher=nexttoken maintainers
; Per user, no elevation: {autopf} is then %LOCALAPPDATA%\Programs, {autoprograms} the user's Start menu.
PrivilegesRequired=lowest
DefaultDirName={autopf}\nexttoken
DefaultGroupName=nexttoken
DisableProgramGroupPage=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=..\dist
OutputBaseFilename=nexttoken-{#AppVersion}-windows-x64-setup
SetupIconFile=..\resources\icons\nexttoken.ico
UninstallDisplayIcon={app}\nexttoken.exe
UninstallDisplayName=nexttoken
; lzma2 over ~870 MB: "normal" packs in minutes where "max" takes much longer for a few % less.
Compression=lzma2/normal
SolidCompression=yes
WizardStyle=modern

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "..\dist\nexttoken\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\nexttoken"; Filename: "{app}\nexttoken.exe"; Comment: "Watch a GPT-2 language model produce its next token"
Name: "{autodesktop}\nexttoken"; Filename: "{app}\nexttoken.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\nexttoken.exe"; Description: "{cm:LaunchProgram,nexttoken}"; Flags: nowait postinstall skipifsilent

; The app keeps its settings and log in the user's folders (%LOCALAPPDATA%\nexttoken), never in {app}:
; the uninstaller removes everything it installed and leaves those.
